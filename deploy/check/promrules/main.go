// Command promrules prints the spec of a PrometheusRule as a plain
// Prometheus rules file, for a Prometheus run without the Prometheus
// Operator:
//
//	cd deploy/check && go run ./promrules ../components/prometheus-rules/prometheusrule.yaml > plantstore.rules.yml
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/plantstore/plantstore/deploy/check"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	var (
		in  []byte
		err error
	)
	switch len(args) {
	case 0:
		in, err = io.ReadAll(stdin)
	case 1:
		in, err = os.ReadFile(args[0])
	default:
		return fmt.Errorf("usage: promrules [PROMETHEUSRULE.yaml]")
	}
	if err != nil {
		return err
	}
	r, err := check.PrometheusRule(in)
	if err != nil {
		return err
	}
	out, err := check.RulesFile(r, "")
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
