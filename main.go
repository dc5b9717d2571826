// Command gateway is the messaging gateway: its subcommands (cli.go lists them) and `serve`,
// which reads the command line and the environment into a node.Config (flags.go) and runs the
// gateway that package node builds from it: node.Open → Serve → a signal → Shutdown.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/node"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "token":
		return token(args[1:], stdout, stderr)
	case "sim":
		return simCmd(args[1:], stderr)
	case "healthcheck":
		return healthcheck(args[1:], stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "gateway", version)
		return nil
	case "help", "-h", "-help", "--help":
		return help(args[1:], stdout)
	}
	if strings.HasPrefix(args[0], "-") {
		return serve(args, stderr) // flags without a command: serve's
	}
	return fmt.Errorf("unknown command %q (%s; see gateway --help)", args[0], commandNames())
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serve(args []string, stderr io.Writer) error {
	c, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// One writer for the logger and the access log's batches, so their lines never interleave.
	c.LogOut, c.Version = &httpapi.LockedWriter{W: stderr}, version
	log, err := newLogger(c.logLevel, c.LogFormat, c.LogOut)
	if err != nil {
		return err
	}
	// hollywood logs through the default logger: configure it once, here.
	slog.SetDefault(log.With("component", "actors"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// The address first: one that can never work fails the start before anything is opened
	// or logged (connections wait in the backlog until Serve).
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	gc := node.TuneGC(c.Config) // process-wide, so here and not in Open
	n, err := node.Open(ctx, c.Config, log)
	if err != nil {
		ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- n.Serve(ln) }()
	log.Info("gateway listening", "addr", ln.Addr().String(), "version", version, "auth", c.Auth, "network", c.Network, "data", c.Data, "store", c.Store, "fsync", c.Fsync, "gogc", gc.Percent, "gomemlimit", gc.MemLimit)
	if c.pprofAddr != "" {
		go node.ServePprof(c.pprofAddr, log)
	}
	if issuer := n.DevIssuer(); issuer != nil {
		logDevHelp(log, c, ln.Addr())
		printDevHelp(stderr, ln.Addr(), issuer)
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-errc:
		err = fmt.Errorf("serve: %w", err)
	case <-n.Lost():
		// A cluster node stopped for good (another process took its node id; its partitions
		// are fenced already), or another gateway took this NATS prefix (this one's state is
		// stale): stop, never write.
		err = fmt.Errorf("serve: %w", n.Err())
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	n.Shutdown(sctx)
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// logDevHelp tells, as one log record, how to mint dev ID tokens and make a first call.
func logDevHelp(log *slog.Logger, c serveConfig, addr net.Addr) {
	port := portOf(addr)
	bin := os.Args[0]
	if strings.Contains(bin, "go-build") {
		bin = "go run ." // started by `go run`
	}
	log.Info("embedded defaults: dev ID tokens; mint one and call the API (README.md shows a first session)",
		"network", c.Network, "data", c.Data,
		"admin_token", fmt.Sprintf("ADMIN=$(%s token --data %s --uid admin --role admin)", bin, c.Data),
		"client_token", fmt.Sprintf("ALICE=$(%s token --data %s --uid alice --name Alice)", bin, c.Data),
		"first_call", fmt.Sprintf(`curl -H "Authorization: Bearer $ADMIN" http://localhost:%s/api/admin/apikeys`, port))
}

// portOf is the port the gateway listens on, as the dev help prints it.
func portOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return fmt.Sprint(a.Port)
	}
	return "8080"
}

// printDevHelp prints ready dashboard links (dev auth): make run's first screen.
func printDevHelp(w io.Writer, addr net.Addr, issuer *identity.Issuer) {
	port := portOf(addr)
	// Ready dashboard links: the token rides in the fragment, which never reaches a server or a
	// log; the page takes it out of the address at once. They last 12 hours.
	admin, err1 := issuer.Mint(identity.TokenRequest{UID: "admin", Role: domain.RoleAdmin, Name: "Admin", TTL: 12 * time.Hour})
	alice, err2 := issuer.Mint(identity.TokenRequest{UID: "alice", Name: "Alice", Email: "alice@example.com", TTL: 12 * time.Hour})
	if err1 != nil || err2 != nil {
		return
	}
	fmt.Fprintf(w, `Open the dashboard (links valid for 12 hours; the form at /dashboard/ signs in as anyone):
  admin:  http://localhost:%[1]s/dashboard/#token=%[2]s
  client: http://localhost:%[1]s/dashboard/#token=%[3]s
  API reference: http://localhost:%[1]s/docs

`, port, admin, alice)
}

func token(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./data", "data directory holding dev-idp.pem (created if missing)")
	uid := fs.String("uid", "", "the user id the token is for (its sub claim); required")
	role := fs.String("role", "", "client or admin (honoured in dev auth only)")
	name := fs.String("name", "", "display name")
	email := fs.String("email", "", "email")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid")
	store := fs.String("store", "badger", "where the dev issuer's key is: badger (DATA/dev-idp.pem) or nats (a cluster's, in its store; needs GATEWAY_SECRET_KEY)")
	var nc node.Config
	fs.StringVar(&nc.NATSURL, "nats", "", "NATS servers, comma-separated (--store nats)")
	fs.StringVar(&nc.NATSPrefix, "nats-prefix", "gateway", "the cluster's NATS prefix (--store nats)")
	fs.StringVar(&nc.NATSCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&nc.NATSTLSCA, "nats-tls-ca", "", "CA certificate of the NATS servers' TLS")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	if *uid == "" {
		return errors.New("token: --uid is required")
	}
	if *role != "" && *role != domain.RoleClient && *role != domain.RoleAdmin {
		return errors.New("token: --role must be client or admin")
	}
	var issuer *identity.Issuer
	var err error
	switch *store {
	case "badger":
		_, issuer, err = identity.NewDev(*data)
	case "nats":
		issuer, err = clusterIssuer(nc)
	default:
		err = errors.New("token: --store must be badger or nats")
	}
	if err != nil {
		return err
	}
	tok, err := issuer.Mint(identity.TokenRequest{UID: *uid, Role: *role, Name: *name, Email: *email, TTL: *ttl})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// clusterIssuer is the dev issuer of the cluster on c's prefix (`gateway token --store nats`):
// its key from the store, opened with GATEWAY_SECRET_KEY (made there if no node made it yet).
func clusterIssuer(c node.Config) (*identity.Issuer, error) {
	if c.NATSURL == "" {
		return nil, errors.New("token: --store nats needs --nats (the NATS servers' URLs)")
	}
	if c.SecretKey = os.Getenv("GATEWAY_SECRET_KEY"); c.SecretKey == "" {
		return nil, errors.New("token: --store nats needs GATEWAY_SECRET_KEY, the cluster's (it seals the dev issuer's key)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return node.ClusterIssuer(ctx, c)
}

// healthcheck asks a gateway on this machine whether it is ready (GET /readyz on --addr or
// GATEWAY_ADDR): the container's HEALTHCHECK, where there is no curl.
func healthcheck(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ":8080", "the gateway's listen address")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := applyEnv(fs); err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("healthcheck: --addr: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: 2 * time.Second}
	res, err := client.Get("http://" + net.JoinHostPort(host, port) + "/readyz")
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: not ready: %d %s", res.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
