// A real OAuth 2.1 authorization server — oidc-provider, pinned in tests/tools/mcp — and an
// MCP server it protects, for tests/e2e/mcp_oauth.rs. Run on Node 22:
// `node oauth_server.mjs ACCESS_TTL_SECONDS NODE_MODULES` (the installed tools' folder, where
// oidc-provider is). Prints one JSON line once both listen: {"mcp": the MCP server's URL,
// "issuer": the authorization server's}.
//
// The authorization server registers clients dynamically, requires PKCE, issues opaque
// access tokens for the MCP server's resource (RFC 8707) that live ACCESS_TTL seconds and
// rotating refresh tokens, and revokes them (RFC 7009). Its login and consent pages answer
// by themselves (the owner is `owner`, who grants what is asked), so following the
// authorization URL with a cookie jar is the whole browser round trip.
//
// The MCP server answers `initialize`, `tools/list` and `tools/call whoami` (the account the
// token is for) only with a valid token for its resource; else 401 with a `Bearer`
// challenge naming its protected resource metadata (RFC 9728).

import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.argv[3] || 'node_modules';
const { default: Provider, errors } = await import(pathToFileURL(path.resolve(modules, 'oidc-provider/lib/index.js')).href);

const ttl = Number(process.argv[2] || 60);
const SCOPE = 'mcp:tools';

const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
const asHttp = http.createServer();
const mcpHttp = http.createServer();
const issuer = `http://127.0.0.1:${await listen(asHttp)}`;
const mcpOrigin = `http://127.0.0.1:${await listen(mcpHttp)}`;
const resource = `${mcpOrigin}/mcp`;

const provider = new Provider(issuer, {
  clients: [],
  scopes: [SCOPE],
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo(ctx, indicator) {
        if (indicator !== resource) throw new errors.InvalidTarget();
        return { scope: SCOPE, audience: resource, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
  pkce: { required: () => true },
  issueRefreshToken: () => true,
  rotateRefreshToken: true,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  clientDefaults: {
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  },
});

const callback = provider.callback();
asHttp.on('request', async (req, res) => {
  const interaction = req.url.match(/^\/interaction\/([^/?]+)/);
  if (!interaction) return callback(req, res);
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      return await provider.interactionFinished(req, res, { login: { accountId: 'owner' } }, { mergeWithLastSubmission: false });
    }
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    return await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  } catch (e) {
    res.statusCode = 500;
    res.end(String(e));
  }
});

const challenge = (error) =>
  `Bearer resource_metadata="${mcpOrigin}/.well-known/oauth-protected-resource/mcp"` + (error ? `, error="${error}"` : '');

const send = (res, status, body, headers = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body === undefined ? '' : JSON.stringify(body));
};

/** The account of a valid token for this resource, or null. */
async function account(req) {
  const header = req.headers.authorization || '';
  if (!header.startsWith('Bearer ')) return null;
  const token = await provider.AccessToken.find(header.slice(7));
  if (!token || token.isExpired || token.aud !== resource) return null;
  return token.accountId;
}

mcpHttp.on('request', async (req, res) => {
  if (req.url === '/.well-known/oauth-protected-resource/mcp') {
    return send(res, 200, { resource, authorization_servers: [issuer], scopes_supported: [SCOPE] });
  }
  if (!req.url.startsWith('/mcp')) return send(res, 404, { error: 'not_found' });
  if (req.method !== 'POST') return send(res, 405, { error: 'method_not_allowed' });
  let text = '';
  for await (const chunk of req) text += chunk;
  const who = await account(req);
  if (!who) {
    const error = req.headers.authorization ? 'invalid_token' : undefined;
    return send(res, 401, { error: error || 'unauthorized' }, { 'www-authenticate': challenge(error) });
  }
  let message;
  try {
    message = JSON.parse(text);
  } catch {
    return send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
  }
  if (message.id === undefined) return send(res, 202);
  const answer = (result) => send(res, 200, { jsonrpc: '2.0', id: message.id, result });
  switch (message.method) {
    case 'initialize':
      return answer({
        protocolVersion: message.params?.protocolVersion || '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'oauth-protected', version: '1.0.0' },
      });
    case 'tools/list':
      return answer({ tools: [{ name: 'whoami', description: 'The account the token is for.', inputSchema: { type: 'object' } }] });
    case 'tools/call':
      return answer({ content: [{ type: 'text', text: who }] });
    case 'ping':
      return answer({});
    default:
      return send(res, 200, { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'method not found' } });
  }
});

console.log(JSON.stringify({ mcp: resource, issuer }));
