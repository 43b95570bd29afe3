package main

import (
	"errors"
	"fmt"
	"syscall"
)

// listenError is the error of the listener of the setting name (addr or
// admin-addr) that could not bind: it names the setting, as the flag or
// the variable that gave the address, and for an address in use the
// likely cause, another plantstore (a "go run . -dev" left running), and
// what to do.
func listenError(cfg serveConfig, what, name string, err error) error {
	setting := "-" + name
	if cfg.set.fromEnv[name] {
		setting = envName(name)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: %w: the address of %s is taken, most likely by another plantstore (a go run . -dev left running?); stop it, or give -%s (or %s) another port",
			what, err, setting, name, envName(name))
	}
	return fmt.Errorf("%s (%s): %w", what, setting, err)
}
