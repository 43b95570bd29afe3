package observability

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
)

// ErrPanic is the error [Recover] pushes for a recovered panic; a renderer
// that does not know it answers 500.
var ErrPanic = errors.New("handler panicked")

// Recover returns middleware that turns a panic in the handlers after it
// into an error on the gin context (wrapping [ErrPanic], with the panic
// value) and aborts the chain, so an error renderer installed before it
// still answers 500 in the API's error shape and the process keeps
// serving. The panic value and stack are logged at Error with the
// request_id. [http.ErrAbortHandler] is re-panicked: it means a response
// already under way must be cut off, not replaced.
func Recover(log *zap.Logger) gin.HandlerFunc {
	if log == nil {
		log = zap.NewNop()
	}
	return func(c *gin.Context) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			log.Error("panic recovered",
				zap.String("request_id", RequestID(c)),
				zap.String("panic", fmt.Sprint(r)),
				zap.StackSkip("stack", 1))
			_ = c.Error(fmt.Errorf("%w: %v", ErrPanic, r))
			c.Abort()
		}()
		c.Next()
	}
}
