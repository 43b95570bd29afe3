// A real OpenID Connect provider (oidc-provider) for the gateway end-to-end
// check: client_credentials grants, RS256 JWT access tokens for the
// audience "plantstore".
//
//   node oidc.mjs genkey KID > key.json    a private RS256 JWK
//   node oidc.mjs serve PORT KEYS.json     KEYS.json: {"keys": [JWK, ...]}
//
// The first key signs; every key is published at /jwks. Rotating means a
// restart with the new key first and the old one after it.
//
// The issuer is http://127.0.0.1:PORT, so providers on two ports are two
// issuers (the check's "staff" and "customers"), even with the same kid.
//
// Clients, all with secret ci-secret, their tokens' sub the client_id:
// plantstore-ci and plantstore-probe (the blackbox exporter's client of
// deploy/prometheus/blackbox.yml; scope plants:read), plantstore-writer
// (scope plants:write only) and plantstore-dpop (plants:read, DPoP only, RFC 9449: its token
// requests need a DPoP proof and its tokens carry cnf.jkt, the thumbprint
// of the proof's key; dpop-client.mjs is such a client).
//
// plantstore-app signs users in, and gets an ID token beside its access
// token: by OpenID Connect CIBA (poll mode), the one flow with no browser.
// POST /backchannel with login_hint=USER and scope "openid plants:read",
// then POST /token with grant_type urn:openid:params:grant-type:ciba and
// the auth_req_id: the user's "authentication device" approves at once.
import { readFile } from 'node:fs/promises';
import { generateKeyPair, exportJWK } from 'jose';

const [mode, arg1, arg2] = process.argv.slice(2);

if (mode === 'genkey') {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: arg1, use: 'sig', alg: 'RS256' };
  process.stdout.write(JSON.stringify(jwk) + '\n');
} else if (mode === 'serve') {
  // Loaded here only: it takes over a second, and genkey does not need it.
  const { default: Provider } = await import('oidc-provider');
  const port = Number(arg1);
  const jwks = JSON.parse(await readFile(arg2, 'utf8'));
  const issuer = `http://127.0.0.1:${port}`;
  const client = (id, scope) => ({
    client_id: id,
    client_secret: 'ci-secret',
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope,
  });
  const resource = 'https://plantstore.example';
  const provider = new Provider(issuer, {
    jwks,
    clients: [
      client('plantstore-ci', 'plants:read'),
      client('plantstore-probe', 'plants:read'),
      client('plantstore-writer', 'plants:write'),
      { ...client('plantstore-dpop', 'plants:read'), dpop_bound_access_tokens: true },
      {
        ...client('plantstore-app', 'openid plants:read'),
        grant_types: ['urn:openid:params:grant-type:ciba'],
        backchannel_token_delivery_mode: 'poll',
      },
    ],
    scopes: ['openid', 'plants:read', 'plants:write'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      ciba: {
        enabled: true,
        deliveryModes: ['poll'],
        processLoginHint: (ctx, loginHint) => loginHint,
        verifyUserCode: () => {},
        validateRequestContext: () => {},
        validateBindingMessage: () => {},
        // The user approves on their device at once: the grant is there
        // before the client first polls.
        async triggerAuthenticationDevice(ctx, request, account, cl) {
          const grant = new provider.Grant({ accountId: account.accountId, clientId: cl.clientId });
          grant.addOIDCScope('openid');
          grant.addResourceScope(resource, 'plants:read');
          await grant.save();
          await provider.backchannelResult(request, grant);
        },
      },
      // On by default in oidc-provider 9; a DPoP proof at the token
      // endpoint binds the token to the proof's key.
      dPoP: { enabled: true },
      // JWT (not opaque) access tokens need resource indicators.
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'plants:read plants:write',
          audience: 'plantstore',
          accessTokenTTL: 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
  });
  provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));
} else {
  console.error('usage: node oidc.mjs genkey KID | serve PORT KEYS.json');
  process.exit(2);
}
