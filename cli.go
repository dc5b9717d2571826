package main

// The command line's help: `gateway --help` (the commands), `gateway <command> --help` (its
// flags, each with the environment variable that also sets it, and its default in the units a
// person reads).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// commands are the subcommands, in the order the help lists them.
var commands = []struct{ name, synopsis, about string }{
	{"serve", "gateway [serve] [flags]", "run the gateway: the REST API, the dashboard at /dashboard/ and the reference at /docs (the default command)"},
	{"token", "gateway token --uid UID [flags]", "mint an ID token from the embedded dev issuer (--auth dev), for curl and scripts"},
	{"sim", "gateway sim [--addr ADDR] [--data DIR]", "run the simulated network as its own process, shared by gateways started with --sim-url (a cluster's nodes)"},
	{"healthcheck", "gateway healthcheck [--addr ADDR]", "exit 0 when the gateway on this machine answers /readyz ready, else 1 (the container's HEALTHCHECK)"},
	{"version", "gateway version", "print the version"},
	{"help", "gateway help [command]", "this help, or a command's flags"},
}

// mainUsage is `gateway --help`.
func mainUsage(w io.Writer) {
	fmt.Fprintln(w, "gateway: a messaging gateway between programs or online stores and accounts on a messaging network.")
	fmt.Fprintln(w, "\nUsage:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-38s %s\n", c.synopsis, c.about)
	}
	fmt.Fprintln(w, `
Flags belong to their command and come after it: "gateway serve --help" lists the server's flags,
"gateway token --help" and "gateway healthcheck --help" theirs. Every flag is also read from the
environment as GATEWAY_<NAME> (--fsync: GATEWAY_FSYNC); a flag on the command line wins.

Without a command, gateway serves on :8080 with embedded defaults: Badger in ./data, the
simulated network and dev sign-in. README.md has a first session step by step.`)
}

// help runs `gateway help [command]`.
func help(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		mainUsage(stdout)
		return nil
	}
	switch args[0] {
	case "serve", "token", "sim", "healthcheck":
		return run([]string{args[0], "--help"}, stdout, stdout)
	case "version", "help":
		mainUsage(stdout)
		return nil
	}
	return fmt.Errorf("unknown command %q (%s)", args[0], commandNames())
}

func commandNames() string {
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// errHelp is a --help that printed the usage: the command exits 0.
var errHelp = flag.ErrHelp

// parseFlags parses a command's flags. A mistake is one line that names the flag as the help
// spells it (--name) and where the help is; --help prints the usage (errHelp).
func parseFlags(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package's own message and usage: replaced below
	defer fs.SetOutput(out)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(out)
		fs.Usage()
		return errHelp
	}
	msg := strings.Replace(err.Error(), "provided but not defined: -", "provided but not defined: --", 1)
	msg = strings.Replace(msg, "flag: help requested", "", 1)
	return fmt.Errorf("%s %s (see gateway %s --help)", fs.Name(), msg, fs.Name())
}

// commandUsage makes fs's usage: the synopsis, what the command does, and every flag with its
// variable and default.
func commandUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		w := fs.Output()
		for _, c := range commands {
			if c.name == fs.Name() {
				fmt.Fprintf(w, "usage: %s\n%s.\n", c.synopsis, upperFirst(c.about))
			}
		}
		fmt.Fprintln(w, "\nFlags (each also read from the environment variable beside it; a flag on the command line wins):")
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if d := humanDefault(f); d != "" {
				def = " (default: " + d + ")"
			}
			env := envName(f.Name)
			if fs.Name() == "sim" {
				env = simEnvName(f.Name)
			}
			fmt.Fprintf(w, "  --%s, %s%s\n      %s\n", f.Name, env, def, f.Usage)
		})
		if fs.Name() == "serve" {
			fmt.Fprintln(w, "  GATEWAY_SECRET_KEY\n      key sealing store credentials at rest (32 bytes as 64 hex digits or base64); default: DATA/secret.key, created on first use")
		}
	}
}

// byteFlags are the flags whose values are sizes in bytes.
var byteFlags = map[string]bool{"media-max-bytes": true, "body-limit": true, "min-free-disk": true, "memtable-size": true}

// humanDefault is a flag's default as a person reads it: sizes in KiB/MiB/GiB, -1 as "the
// network's default", nothing for an empty string or false.
func humanDefault(f *flag.Flag) string {
	v := f.DefValue
	switch {
	case v == "" || v == "false":
		return ""
	case v == "-1" || v == "-1ns":
		return "the network's own"
	case byteFlags[f.Name]:
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			return humanBytes(n)
		}
	}
	if d, err := time.ParseDuration(v); err == nil && strings.HasSuffix(v, "s") {
		out := d.String() // 1h0m0s → 1h, 2m0s → 2m
		if strings.HasSuffix(out, "m0s") {
			out = strings.TrimSuffix(out, "0s")
		}
		if strings.HasSuffix(out, "h0m") {
			out = strings.TrimSuffix(out, "0m")
		}
		return out
	}
	return v
}

func humanBytes(n int64) string {
	for _, u := range []struct {
		unit string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.unit)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
