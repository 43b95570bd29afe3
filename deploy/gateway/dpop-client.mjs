// A DPoP client (RFC 9449) for the gateway end-to-end check
// (deploy/check/gateway_test.go), made with oauth4webapi as an application
// would be:
//
//   node dpop-client.mjs RESOURCE ISSUER CLIENT_ID [REQUEST_ID]
//
// 1. It reads the protected resource metadata of RESOURCE (RFC 9728, at
//    /.well-known/oauth-protected-resource), which must name RESOURCE as
//    the resource and ISSUER among its authorization servers.
// 2. It discovers ISSUER and gets an access token for CLIENT_ID (secret
//    ci-secret, scope plants:read) by client_credentials, with a DPoP proof
//    of a new ES256 key, so the token is bound to that key.
// 3. It calls GET RESOURCE/plants with "Authorization: DPoP <token>" and a
//    fresh proof whose htu is that URL, and X-Request-ID when given. When
//    the resource asks for a server nonce (401 use_dpop_nonce), it sends
//    the request once more, as oauth4webapi documents (isDPoPNonceError):
//    its DPoP handle kept the nonce of the DPoP-Nonce header and puts it in
//    the new proof. The second request's X-Request-ID ends in "-retried".
//
// It prints one JSON object: the metadata, the token, the Authorization
// and DPoP headers it sent last, the response's status, WWW-Authenticate,
// DPoP-Nonce and body, and, when it was asked for a nonce, the first
// response's status and WWW-Authenticate. A failure before the call exits
// non-zero.
import * as oauth from 'oauth4webapi';

const [resource, issuer, clientId, requestId, alg = 'ES256'] = process.argv.slice(2);
if (!resource || !issuer || !clientId) {
  console.error('usage: node dpop-client.mjs RESOURCE ISSUER CLIENT_ID [REQUEST_ID [ALG]]');
  process.exit(2);
}
const insecure = { [oauth.allowInsecureRequests]: true }; // http, on 127.0.0.1 only

const rs = new URL(resource);
const metadata = await oauth.processResourceDiscoveryResponse(rs, await oauth.resourceDiscoveryRequest(rs, insecure));
if (!metadata.authorization_servers?.includes(issuer)) {
  throw new Error(`${issuer} is not among the authorization servers of ${resource}: ${JSON.stringify(metadata)}`);
}

const iss = new URL(issuer);
const as = await oauth.processDiscoveryResponse(iss, await oauth.discoveryRequest(iss, insecure));
const client = { client_id: clientId };
const clientAuth = oauth.ClientSecretBasic('ci-secret');
const DPoP = oauth.DPoP(client, await oauth.generateKeyPair(alg));
const grant = async () => oauth.processClientCredentialsResponse(as, client,
  await oauth.clientCredentialsGrantRequest(as, client, clientAuth, { scope: 'plants:read' }, { DPoP, ...insecure }));
let tokens;
try {
  tokens = await grant();
} catch (err) {
  // A server that wants a nonce says so once; the handle has cached it.
  if (!oauth.isDPoPNonceError(err)) throw err;
  tokens = await grant();
}

const url = new URL(`${resource.replace(/\/$/, '')}/plants`);
const headers = new Headers(requestId ? { 'x-request-id': requestId } : {});
let sent;
const call = () => oauth.protectedResourceRequest(tokens.access_token, 'GET', url, headers, null, {
  DPoP,
  ...insecure,
  [oauth.customFetch]: (u, init) => {
    sent = new Headers(init.headers);
    return fetch(u, init);
  },
});
let response;
let nonceAsked;
try {
  try {
    response = await call();
  } catch (err) {
    // A resource that wants a nonce says so once; the handle has cached it.
    if (!oauth.isDPoPNonceError(err)) throw err;
    nonceAsked = { status: err.response.status, www_authenticate: err.response.headers.get('www-authenticate') };
    if (requestId) headers.set('x-request-id', `${requestId}-retried`); // for the access log only
    response = await call();
  }
} catch (err) {
  // A 401 or 403 with a challenge: reported, for the check to judge.
  if (!(err instanceof oauth.WWWAuthenticateChallengeError)) throw err;
  response = err.response;
}

console.log(JSON.stringify({
  metadata,
  token_type: tokens.token_type,
  access_token: tokens.access_token,
  authorization: sent.get('authorization'),
  dpop: sent.get('dpop'),
  status: response.status,
  www_authenticate: response.headers.get('www-authenticate'),
  dpop_nonce: response.headers.get('dpop-nonce'),
  nonce_asked: nonceAsked,
  body: await response.text(),
}));
