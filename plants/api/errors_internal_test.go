package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/plants"
)

// httpStatusError is an error of another package that tells only its
// status.
type httpStatusError int

func (e httpStatusError) Error() string {
	return fmt.Sprintf("status %d, with a detail that stays in the logs", int(e))
}
func (e httpStatusError) HTTPStatus() int { return int(e) }

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		msg    string
	}{
		{"limit reason", errLimitSyntax, 400, "invalid limit: want an integer from 0 to 2147483647, digits only"},
		{"limit reason wrapped", fmt.Errorf("list plants: %w", errLimitRange), 400, "invalid limit: over 2147483647"},
		{"ErrInvalidLimit itself", ErrInvalidLimit, 400, "invalid limit"},
		{"ErrInvalidLimit wrapped", fmt.Errorf("parse: %w", ErrInvalidLimit), 400, "invalid limit"},
		{"404", errNotFound, 404, "not found"},
		{"405", errMethodNotAllowed, 405, "method not allowed"},
		{"431", errHeaderTooLarge, 431, "request header fields too large"},
		{"auth refusal", &auth.Error{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: auth.ReasonExpired}, 401, "missing or invalid credential"},
		{"auth scope", &auth.Error{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: auth.ReasonScope, Scope: "s"}, 403, "insufficient scope"},
		{"other status, its message not sent", fmt.Errorf("limit caller: %w", httpStatusError(429)), 429, "too many requests"},
		{"other 5xx status", httpStatusError(502), 502, "internal error"},
		{"store unavailable", fmt.Errorf("list plants: %w: database down", plants.ErrUnavailable), 503, "store unavailable"},
		{"canceled", fmt.Errorf("list plants: %w", context.Canceled), 503, "request canceled"},
		{"deadline", context.DeadlineExceeded, 503, "request timed out"},
		{"unknown", errors.New("SELECT secret FROM x"), 500, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, msg := classify(tt.err)
			if status != tt.status || msg != tt.msg {
				t.Errorf("classify(%v) = %d, %q; want %d, %q", tt.err, status, msg, tt.status, tt.msg)
			}
		})
	}
}

// TestLimitErrorsAreInvalidLimit checks that every reason ParseLimit gives
// matches ErrInvalidLimit, and that no other error of the package does.
func TestLimitErrorsAreInvalidLimit(t *testing.T) {
	for _, err := range []error{errLimitEmpty, errLimitSyntax, errLimitRange, errLimitTwice, errLimitEncoding} {
		if !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("errors.Is(%v, ErrInvalidLimit) = false; want true", err)
		}
	}
	for _, err := range []error{errNotFound, errMethodNotAllowed, errHeaderTooLarge} {
		if errors.Is(err, ErrInvalidLimit) {
			t.Errorf("errors.Is(%v, ErrInvalidLimit) = true; want false", err)
		}
	}
}
