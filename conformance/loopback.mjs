// Preloaded (node --import) by `run` into the server it puts behind the proxy (server-everything).
// Its code calls listen(port) with no address, which binds every interface; this makes such a
// listen bind 127.0.0.1 only, so that the server is not reachable from outside this machine. A
// listen that names an address or a socket path is left as it is. (The suite's own scenario
// servers are kept to loopback by the network namespace `run` runs its test phase in.)
//
// With CONFORMANCE_PORT_FILE set, the port of the process's first listening TCP server is written
// to that file: `run` starts the server on port 0 (a free port) and reads it there.
import fs from 'node:fs';
import net from 'node:net';

const LOOPBACK = '127.0.0.1';
const listen = net.Server.prototype.listen;
let portFile = process.env.CONFORMANCE_PORT_FILE;

function isPort(value) {
  return (
    (typeof value === 'number' && Number.isInteger(value)) ||
    (typeof value === 'string' && /^\d+$/.test(value))
  );
}

net.Server.prototype.listen = function (...args) {
  const [first, second] = args;
  if (args.length === 0 || typeof first === 'function' || first === undefined) {
    // listen() or listen(callback): port 0 on every interface.
    args.splice(0, first === undefined && args.length > 0 ? 1 : 0, 0, LOOPBACK);
  } else if (isPort(first) && typeof second !== 'string') {
    // listen(port[, backlog][, callback]): insert the address.
    args.splice(1, 0, LOOPBACK);
  } else if (
    first !== null &&
    typeof first === 'object' &&
    !first.path &&
    !first.host &&
    !first.fd &&
    !first.handle &&
    !(first instanceof net.Server) &&
    !('_handle' in first)
  ) {
    // listen({ port }): add the address.
    args[0] = { ...first, host: LOOPBACK };
  }
  if (portFile) {
    const file = portFile;
    portFile = undefined;
    this.once('listening', () => {
      const address = this.address();
      if (address && typeof address === 'object') {
        fs.writeFileSync(`${file}.tmp`, String(address.port));
        fs.renameSync(`${file}.tmp`, file);
      }
    });
  }
  return listen.apply(this, args);
};
