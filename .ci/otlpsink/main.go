// Command otlpsink is the OTLP endpoint of deploy/check's end-to-end tracing
// test (TestGatewayEndToEndTracing): it runs the OpenTelemetry Collector's
// own OTLP receiver (go.opentelemetry.io/collector/receiver/otlpreceiver) and
// writes every trace export it receives, over OTLP/HTTP or OTLP/gRPC, as one
// line of OTLP JSON (ptrace.JSONMarshaler) to the file -out, flushed at once.
//
// The test thus checks plantstore's exporter against the receiver a real
// collector would run, decoding and all, without a full collector build
// (ocb, a config file and an exporter) for what is one receiver and a file.
//
//	otlpsink -http 127.0.0.1:4318 [-grpc 127.0.0.1:4317] -out spans.jsonl
//
// It prints "otlpsink ready" once its listeners accept and stops on SIGTERM
// or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

func main() {
	httpAddr := flag.String("http", "", "OTLP/HTTP listen address, e.g. 127.0.0.1:4318 (required)")
	grpcAddr := flag.String("grpc", "", "OTLP/gRPC listen address, e.g. 127.0.0.1:4317 (optional)")
	out := flag.String("out", "", "file to append one JSON line per trace export to (required)")
	flag.Parse()
	if *httpAddr == "" || *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(0)
	log.SetPrefix("otlpsink: ")

	f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var marshaler ptrace.JSONMarshaler
	sink, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		b, err := marshaler.MarshalTraces(td)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		// One write per line, the file unbuffered: a reader sees whole lines.
		if _, err := f.Write(append(b, '\n')); err != nil {
			log.Print(err)
			return err
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	// The protocols' defaults are off until set, as in a collector's
	// config: each one asked for is turned on with its defaults.
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = *httpAddr
	if *grpcAddr != "" {
		cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = *grpcAddr
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rcv, err := factory.CreateTraces(ctx, receivertest.NewNopSettings(factory.Type()), cfg, sink)
	if err != nil {
		log.Fatal(err)
	}
	// Start listens before it returns: once it has, both listeners accept.
	if err := rcv.Start(ctx, componenttest.NewNopHost()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("otlpsink ready")

	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rcv.Shutdown(shutdown); err != nil {
		log.Fatal(err)
	}
}
