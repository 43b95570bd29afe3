package observability

import (
	"context"
	"net/http"
	"strings"
)

// A Check is one named part of readiness, a line of /readyz?verbose.
type Check struct {
	// Name names the check on its line: "[+]store ok". It is a fixed
	// name or one of the configuration's (an issuer's), never a value
	// taken from a request.
	Name string
	// Run returns nil when the part is ready, else an error whose text is
	// the reason on the line. The text is shown to whoever reaches the
	// admin listener, so it must carry no secret.
	Run func(ctx context.Context) error
	// Advisory marks a part that never fails readiness (a dependency the
	// service works without): its line is [+] or [-] as for any check,
	// and the status stays 200 when it alone fails.
	Advisory bool
}

// writeVerbose runs checks in order, all within ctx, and writes one line
// per check in the Kubernetes API server's format, "[+]name ok" or
// "[-]name reason", then "readyz check passed" or "readyz check failed".
// The status is 200 when no check but an advisory one failed, else 503
// with Retry-After, as /readyz without verbose answers.
func writeVerbose(ctx context.Context, w http.ResponseWriter, checks []Check) {
	var b strings.Builder
	failed := false
	for _, c := range checks {
		err := c.Run(ctx)
		if err == nil {
			b.WriteString("[+]" + c.Name + " ok\n")
			continue
		}
		failed = failed || !c.Advisory
		b.WriteString("[-]" + c.Name + " " + oneLine(err.Error()) + "\n")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		b.WriteString("readyz check failed\n")
		w.Header().Set("Retry-After", "5")
		writeText(w, http.StatusServiceUnavailable, b.String())
		return
	}
	b.WriteString("readyz check passed\n")
	writeText(w, http.StatusOK, b.String())
}

// oneLine keeps a reason on its line: errors.Join puts its parts on lines
// of their own.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "failed"
	}
	return strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", "; ").Replace(s)
}
