// The --bearer-token-command of the auth scenarios: gets an access token the way a user's own
// tooling would (an IdP's CLI, a script around a client-credentials grant) and prints it on
// standard output, which is all the proxy reads. The proxy runs no OAuth flow of its own: it runs
// this at start and after a 401, and sends "Authorization: Bearer <token>".
//
// The scenario's credentials come from MCP_CONFORMANCE_CONTEXT (set by the suite) and the MCP
// server's URL from CONFORMANCE_SERVER_URL (set by stdio-client.mjs). The authorization server is
// found from the MCP server's protected resource metadata, only because the suite starts it on a
// port chosen at random: a user's tooling would be configured with its IdP.
import {
  auth,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata
} from '@modelcontextprotocol/sdk/client/auth.js';
import {
  ClientCredentialsProvider,
  PrivateKeyJwtProvider
} from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
const serverUrl = process.env.CONFORMANCE_SERVER_URL;

async function withProvider(provider) {
  const result = await auth(provider, { serverUrl });
  const tokens = provider.tokens();
  if (result !== 'AUTHORIZED' || !tokens?.access_token) {
    throw new Error(`no token: auth() returned ${result}`);
  }
  return tokens.access_token;
}

async function issuer() {
  const resource = await discoverOAuthProtectedResourceMetadata(serverUrl);
  const [first] = resource.authorization_servers ?? [];
  if (!first) throw new Error('the protected resource metadata names no authorization server');
  return first;
}

// OAuth client credentials, the client authenticated with client_secret_basic (SEP-1046).
async function clientCredentialsBasic() {
  return withProvider(
    new ClientCredentialsProvider({
      clientId: context.client_id,
      clientSecret: context.client_secret,
      expectedIssuer: await issuer()
    })
  );
}

// OAuth client credentials, the client authenticated with a private_key_jwt assertion (SEP-1046).
async function clientCredentialsJwt() {
  return withProvider(
    new PrivateKeyJwtProvider({
      clientId: context.client_id,
      privateKey: context.private_key_pem,
      algorithm: context.signing_algorithm || 'ES256',
      expectedIssuer: await issuer()
    })
  );
}

async function postForm(url, params, headers = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params)
  });
  if (!response.ok) {
    throw new Error(`${url}: HTTP ${response.status} ${await response.text()}`);
  }
  return response.json();
}

// Cross-app access (SEP-990): the enterprise IdP's ID token is exchanged at the IdP for an ID-JAG
// (RFC 8693 token exchange), which the MCP server's authorization server takes as a JWT bearer
// grant (RFC 7523) for an access token.
async function crossAppAccess() {
  const resource = await discoverOAuthProtectedResourceMetadata(serverUrl);
  const metadata = await discoverAuthorizationServerMetadata(resource.authorization_servers[0]);
  if (!metadata) throw new Error('no authorization server metadata');
  const grant = await postForm(context.idp_token_endpoint, {
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
    requested_token_type: 'urn:ietf:params:oauth:token-type:id-jag',
    audience: metadata.issuer,
    resource: resource.resource,
    subject_token: context.idp_id_token,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
    client_id: context.idp_client_id
  });
  const basic = Buffer.from(
    `${encodeURIComponent(context.client_id)}:${encodeURIComponent(context.client_secret)}`
  ).toString('base64');
  const token = await postForm(
    metadata.token_endpoint,
    { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: grant.access_token },
    { Authorization: `Basic ${basic}` }
  );
  return token.access_token;
}

const flows = {
  'auth/client-credentials-basic': clientCredentialsBasic,
  'auth/client-credentials-jwt': clientCredentialsJwt,
  'auth/cross-app-access-complete-flow': crossAppAccess
};

try {
  const flow = flows[context.name];
  if (!flow) throw new Error(`no token flow for scenario ${context.name}`);
  if (!serverUrl) throw new Error('CONFORMANCE_SERVER_URL is not set');
  process.stdout.write(`${await flow()}\n`);
} catch (error) {
  // The proxy reports the first line of standard error.
  console.error(`token-command: ${error instanceof Error ? error.message : error}`);
  process.exit(1);
}
