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
// Clients: plantstore-ci (scope plants:read) and plantstore-writer (scope
// plants:write only), both with secret ci-secret. Their tokens' sub is the
// client_id.
import { readFile } from 'node:fs/promises';
import Provider from 'oidc-provider';
import { generateKeyPair, exportJWK } from 'jose';

const [mode, arg1, arg2] = process.argv.slice(2);

if (mode === 'genkey') {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: arg1, use: 'sig', alg: 'RS256' };
  process.stdout.write(JSON.stringify(jwk) + '\n');
} else if (mode === 'serve') {
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
  const provider = new Provider(issuer, {
    jwks,
    clients: [client('plantstore-ci', 'plants:read'), client('plantstore-writer', 'plants:write')],
    scopes: ['plants:read', 'plants:write'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // JWT (not opaque) access tokens need resource indicators.
      resourceIndicators: {
        enabled: true,
        defaultResource: () => 'https://plantstore.example',
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
