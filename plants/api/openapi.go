package api

import _ "embed"

// OpenAPI is the API's OpenAPI 3.1.0 document, served by the admin listener
// as /openapi.json: the seed interface (GET /plants, bearer security,
// limit, Plant, Error) plus every status the service answers with. Callers
// must not modify it.
//
//go:embed openapi.json
var OpenAPI []byte
