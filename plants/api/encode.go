package api

import (
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/plants"
)

// appendPlantJSON appends the API's JSON object for p to dst:
// {"name":"…","tag":"…"}, without "tag" when p has none. Nothing else of p
// is ever written, so ids and readers cannot leak.
func appendPlantJSON(dst []byte, p plants.Plant) []byte {
	dst = append(dst, `{"name":`...)
	dst = observability.AppendJSONString(dst, p.Name)
	if p.Tag != "" {
		dst = append(dst, `,"tag":`...)
		dst = observability.AppendJSONString(dst, p.Tag)
	}
	return append(dst, '}')
}
