package observability_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/plantstore/plantstore/observability"
)

func TestRecover(t *testing.T) {
	log, buf := newLogger(t, "info")
	e := gin.New()
	// render stands in for the API's error renderer.
	render := func(c *gin.Context) {
		c.Next()
		if err := c.Errors.Last(); err != nil && !c.Writer.Written() {
			status := http.StatusBadRequest
			if errors.Is(err.Err, observability.ErrPanic) {
				status = http.StatusInternalServerError
			}
			c.String(status, "error")
		}
	}
	e.Use(observability.Middleware(log, newCapture(), nil), render, observability.Recover(log))
	e.GET("/boom", func(c *gin.Context) { panic("secret-free bug") })
	e.GET("/abort", func(c *gin.Context) { panic(http.ErrAbortHandler) })
	e.GET("/fine", func(c *gin.Context) { c.String(http.StatusOK, "fine") })
	srv := startServer(t, e)

	tests := []struct {
		path       string
		wantStatus int // 0: the connection is cut
		wantLines  int
	}{
		{"/boom", 500, 2},
		{"/fine", 200, 1},
		{"/abort", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			before := len(buf.lines(t))
			resp, err := http.DefaultClient.Do(newRequest(t, http.MethodGet, srv.URL+tt.path))
			if tt.wantStatus == 0 {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("GET %s = %d, want the connection cut", tt.path, resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatalf("GET %s: %v", tt.path, err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("GET %s = %d, want %d", tt.path, resp.StatusCode, tt.wantStatus)
				}
			}
			lines := buf.lines(t)[before:]
			if len(lines) != tt.wantLines {
				t.Fatalf("GET %s wrote %d log lines, want %d: %v", tt.path, len(lines), tt.wantLines, lines)
			}
			if tt.wantLines == 2 {
				p := lines[0]
				if p["msg"] != "panic recovered" || p["panic"] != "secret-free bug" || !strings.Contains(p["stack"].(string), "recover_test.go") || p["request_id"] == "" {
					t.Errorf("GET %s panic line = %v, want msg, panic value, stack and request_id", tt.path, p)
				}
			}
			if last := lines[len(lines)-1]; last["msg"] != "request" {
				t.Errorf("GET %s last line = %v, want the access log line", tt.path, last)
			}
		})
	}
}
