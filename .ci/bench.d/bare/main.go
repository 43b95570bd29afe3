// Command bare is the reference server of .ci/bench: a net/http server
// that answers every request with the bytes of a GET /plants response read
// from a file, and does nothing else (no routing, auth, logging or
// metrics). It is the physical limit plantstore is measured against.
//
// With -work D it also spins for D per request before answering: a
// calibration of the machine, showing how far a fixed amount of CPU work
// per request moves the ratio to the plain reference.
//
//	bare -addr 127.0.0.1:8081 -body body.json [-work 2us]
package main

import (
	"flag"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	bodyPath := flag.String("body", "", "file holding the response body (required)")
	work := flag.Duration("work", 0, "CPU time to spin per request before answering")
	flag.Parse()
	body, err := os.ReadFile(*bodyPath)
	if err != nil {
		log.Fatal(err)
	}
	// The headers plantstore sends, X-Request-ID of the same length.
	contentType := []string{"application/json"}
	noStore := []string{"no-store"}
	vary := []string{"Authorization"}
	requestID := []string{"0123456789abcdef0123456789abcdef"}
	length := []string{strconv.Itoa(len(body))}
	srv := &http.Server{
		Addr: *addr,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if *work > 0 {
				for start := time.Now(); time.Since(start) < *work; {
				}
			}
			h := w.Header()
			h["Content-Type"] = contentType
			h["Cache-Control"] = noStore
			h["Vary"] = vary
			h["X-Request-Id"] = requestID
			h["Content-Length"] = length
			w.Write(body)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	log.Fatal(srv.ListenAndServe())
}
