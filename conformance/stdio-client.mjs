// The client under test for the suite's client scenarios: an MCP client on the official
// TypeScript SDK that talks to agentcore-mcp-proxy over stdio, the proxy forwarding to the
// scenario's server. So what the suite checks at its server is what the proxy sends.
//
//   MCP_CONFORMANCE_SCENARIO=<scenario> node stdio-client.mjs <server URL>
//
// The suite sets MCP_CONFORMANCE_SCENARIO (and MCP_CONFORMANCE_CONTEXT for the auth scenarios)
// and appends the URL of the server it started. AGENTCORE_MCP_PROXY is the proxy's path.
//
// The proxy needs a token or SigV4 for any --url. The scenarios that test no authorization run
// it with --bearer-token-env and a placeholder token their servers ignore; the auth scenarios run
// it with --bearer-token-command, the command (token-command.mjs) getting the token the way a
// user's own tooling would, outside the proxy.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
const serverUrl = process.argv[2];
const proxy = process.env.AGENTCORE_MCP_PROXY;

function log(...args) {
  console.error('[stdio-client]', ...args);
}

// A word the shell reads back as the same string (for --bearer-token-command, run by sh -c).
function shellWord(text) {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

// The proxy's command line for this scenario.
function proxyArgs() {
  if (scenario.startsWith('auth/')) {
    const command = [process.execPath, path.join(here, 'token-command.mjs')]
      .map(shellWord)
      .join(' ');
    return ['--url', serverUrl, '--bearer-token-command', command];
  }
  return ['--url', serverUrl, '--bearer-token-env', 'CONFORMANCE_PLACEHOLDER_TOKEN'];
}

async function connect(capabilities = {}) {
  const client = new Client({ name: 'agentcore-mcp-proxy-conformance', version: '1.0.0' }, { capabilities });
  const transport = new StdioClientTransport({
    command: proxy,
    args: proxyArgs(),
    env: {
      ...process.env,
      // Read by the proxy (--bearer-token-env) and by token-command.mjs.
      CONFORMANCE_PLACEHOLDER_TOKEN: 'conformance-placeholder-token',
      CONFORMANCE_SERVER_URL: serverUrl,
      RUST_LOG: process.env.RUST_LOG ?? 'info'
    },
    // The proxy's log goes to this process's standard error, which the suite keeps.
    stderr: 'inherit'
  });
  await client.connect(transport);
  log('connected:', JSON.stringify(client.getServerVersion()));
  return { client, close: () => closeProxy(client, transport) };
}

// Ends the session as an MCP client does: closes the proxy's standard input. The SDK then gives
// the proxy 2 s to exit, sends SIGTERM, 2 s more, then SIGKILL. How long it took is logged, and
// `run` reports a proxy that was not gone within those first 2 s.
async function closeProxy(client, transport) {
  // The SDK keeps the child process private; the pinned version names it _process.
  const child = transport._process;
  const exited = new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      resolve(child ? { code: child.exitCode, signal: child.signalCode } : {});
    } else {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    }
  });
  const started = performance.now();
  await client.close();
  const { code, signal } = await exited;
  const elapsed = Math.round(performance.now() - started);
  const how = signal ? `killed by ${signal}` : `exit code ${code}`;
  log(
    `proxy exit: ${how}, ${elapsed} ms after its standard input closed` +
      (signal ? ' (PROXY-SLOW-EXIT: not gone within the 2 s an SDK client gives it)' : '')
  );
}

// What each scenario asks a client to do.
const scenarios = {
  // The handshake, then tools/list.
  async initialize() {
    const { client, close } = await connect();
    await client.listTools();
    await close();
  },

  // Calls the one tool the server offers, add_numbers.
  async tools_call() {
    const { client, close } = await connect();
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === 'add_numbers');
    if (!tool) throw new Error(`no add_numbers tool in ${JSON.stringify(tools)}`);
    const result = await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
    log('add_numbers:', JSON.stringify(result));
    await close();
  },

  // The server's tool elicits a form; the client accepts with empty content and the SDK fills
  // in the schema's defaults (SEP-1034). The request and the answer cross the proxy.
  async 'elicitation-sep1034-client-defaults'() {
    const { client, close } = await connect({ elicitation: { form: { applyDefaults: true } } });
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      log('elicitation:', JSON.stringify(request.params));
      return { action: 'accept', content: {} };
    });
    const result = await client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} });
    log('test_client_elicitation_defaults:', JSON.stringify(result));
    await close();
  },

  // The server ends the tool call's SSE stream before the answer, with retry: 500; the answer
  // comes on the GET stream the client must reopen after 500 ms with Last-Event-ID (SEP-1699).
  // Over stdio that reconnection is the proxy's.
  async 'sse-retry'() {
    const { client, close } = await connect();
    await client.listTools();
    const result = await client.callTool({ name: 'test_reconnection', arguments: {} });
    log('test_reconnection:', JSON.stringify(result));
    await close();
  },

  // Authorization scenarios whose token is had without the MCP client: the proxy runs
  // token-command.mjs, which does the grant, and sends its token on every request.
  async 'auth/client-credentials-basic'() {
    await authorizedSession();
  },
  async 'auth/client-credentials-jwt'() {
    await authorizedSession();
  },
  async 'auth/cross-app-access-complete-flow'() {
    await authorizedSession({ callTool: true });
  }
};

async function authorizedSession({ callTool = false } = {}) {
  const { client, close } = await connect();
  await client.listTools();
  if (callTool) {
    const result = await client.callTool({ name: 'test-tool', arguments: {} });
    log('test-tool:', JSON.stringify(result));
  }
  await close();
}

async function main() {
  if (!scenario || !serverUrl || !proxy) {
    console.error(
      'usage: MCP_CONFORMANCE_SCENARIO=<scenario> AGENTCORE_MCP_PROXY=<path> node stdio-client.mjs <server URL>'
    );
    process.exit(2);
  }
  const run = scenarios[scenario];
  if (!run) {
    console.error(`stdio-client: no handler for scenario ${scenario}; handled: ${Object.keys(scenarios).join(', ')}`);
    process.exit(2);
  }
  await run();
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error('[stdio-client] failed:', error);
    process.exit(1);
  }
);
