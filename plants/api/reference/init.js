// Renders /openapi.json, resolved from this page's own address so that
// the page works behind a path prefix (kubectl proxy) too. Nothing here
// reaches another host: no validator badge (validatorUrl), no
// configuration from the page's query (queryConfigEnabled), and no "Try
// it out", whose requests would go to the API listener, another origin
// that this page's Content-Security-Policy does not allow.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: new URL("openapi.json", document.baseURI).href,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    queryConfigEnabled: false,
    supportedSubmitMethods: [],
    defaultModelsExpandDepth: 1,
    docExpansion: "list",
  });
});
