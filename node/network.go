package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/cloud"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/simhttp"
	"github.com/gateway/gateway/network/whatsapp"
)

// Interface guards: the networks a node opens.
var (
	_ network.Network     = (*sim.Network)(nil)
	_ network.Network     = (*simhttp.Network)(nil)
	_ httpapi.SimControls = (*sim.Network)(nil)
)

// openNetwork opens the messaging network: WhatsApp, the embedded simulation (returned twice:
// its dev controls too), or a `gateway sim` process's (--sim-url).
func openNetwork(c Config, log *slog.Logger) (network.Network, *sim.Network, error) {
	switch {
	case c.Network == "whatsapp":
		// Process-wide settings of the WhatsApp libraries, made once before any client exists.
		whatsapp.RouteSignalLogs(log.With("component", "libsignal"))
		whatsapp.SetDeviceName("gateway")
		wa, err := whatsapp.Open(whatsapp.Options{DBPath: filepath.Join(c.Data, "whatsapp.db"), StoreURL: c.WhatsAppStore,
			Logger: log.With("component", "whatsapp"), RejectCalls: c.RejectCalls, FFmpeg: c.FFmpeg,
			HTTPClient: c.WhatsAppHTTPClient})
		if err != nil {
			return nil, nil, fmt.Errorf("open whatsapp store: %w", err)
		}
		return wa, nil, nil
	case c.SimURL != "":
		n, err := simhttp.Dial(simhttp.Options{URL: c.SimURL, Logger: log.With("component", "sim")})
		if err != nil {
			return nil, nil, err
		}
		return n, nil, nil
	}
	s, err := sim.Open(sim.Options{Dir: filepath.Join(c.Data, "sim"), AutoPair: c.SimAutopair, Latency: c.SimLatency, Logger: log.With("component", "sim")})
	if err != nil {
		return nil, nil, fmt.Errorf("open sim network: %w", err)
	}
	return s, s, nil
}

// The Cloud API network's defaults (`--cloud-graph-url`, `--cloud-graph-version`,
// `--cloud-in-doubt`).
const (
	DefaultCloudGraphURL     = cloudapi.DefaultGraphURL
	DefaultCloudGraphVersion = cloudapi.DefaultVersion
	DefaultCloudInDoubt      = cloud.DefaultInDoubt
)

// openCloud opens the Cloud API network (DESIGN.md section 17): every node has it, whatever
// --network says; it sends for the sessions of kind cloud.
func openCloud(c Config, log *slog.Logger) *cloud.Network {
	return cloud.New(cloud.Options{GraphURL: c.CloudGraphURL, Version: c.CloudGraphVersion, InDoubt: c.CloudInDoubt,
		Logger: log.With("component", "cloud")})
}

// fencedCloud is the Cloud API network of a partition: its sessions' clients fenced like the
// linked network's; what connect, the template sync and the webhooks ask of Meta as it is.
type fencedCloud struct {
	fencedNetwork
	cloud *cloud.Network
}

var _ engine.CloudNetwork = fencedCloud{}

func (f fencedCloud) Check(ctx context.Context, a domain.CloudAccount) (domain.CloudNumber, error) {
	return f.cloud.Check(ctx, a)
}

func (f fencedCloud) Templates(ctx context.Context, a domain.CloudAccount) ([]domain.CloudTemplate, error) {
	return f.cloud.Templates(ctx, a)
}

func (f fencedCloud) Webhook(body []byte, signature string) error {
	return f.cloud.Webhook(body, signature)
}

// fencedNetwork refuses a partition's network calls once this node may no longer run it (a
// process paused past its lease must not connect or send for a session another node runs
// now); the refusal is ErrNotConnected, which keeps messages queued.
type fencedNetwork struct {
	network.Network
	ok func() bool
}

func (f fencedNetwork) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := f.Network.Open(sessionID, sink, opts...)
	if err != nil {
		return nil, err
	}
	return fencedClient{c, f.ok}, nil
}

// Close is the node's to make, not a partition's.
func (f fencedNetwork) Close() error { return nil }

type fencedClient struct {
	network.Client
	ok func() bool
}

var errFencedNetwork = fmt.Errorf("%w: this node no longer runs the session's partition", domain.ErrNotConnected)

func (c fencedClient) Connect(ctx context.Context) error {
	if !c.ok() {
		return errFencedNetwork
	}
	return c.Client.Connect(ctx)
}

func (c fencedClient) PairPhone(ctx context.Context, phone string) (string, error) {
	if !c.ok() {
		return "", errFencedNetwork
	}
	return c.Client.PairPhone(ctx, phone)
}

func (c fencedClient) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if !c.ok() {
		return network.Receipt{}, errFencedNetwork
	}
	return c.Client.Send(ctx, m)
}

func (c fencedClient) Logout(ctx context.Context) error {
	if !c.ok() {
		return errFencedNetwork
	}
	return c.Client.Logout(ctx)
}

// fenced runs a network call of the client unless the node lost the partition.
func fenced[T any](c fencedClient, call func() (T, error)) (T, error) {
	if !c.ok() {
		var zero T
		return zero, errFencedNetwork
	}
	return call()
}

func (c fencedClient) Lookup(ctx context.Context, phones []string) ([]domain.NumberCheck, error) {
	return fenced(c, func() ([]domain.NumberCheck, error) { return c.Client.Lookup(ctx, phones) })
}

func (c fencedClient) MarkRead(ctx context.Context, ref domain.MessageRef) error {
	_, err := fenced(c, func() (struct{}, error) { return struct{}{}, c.Client.MarkRead(ctx, ref) })
	return err
}

func (c fencedClient) Groups(ctx context.Context) ([]domain.Group, error) {
	return fenced(c, func() ([]domain.Group, error) { return c.Client.Groups(ctx) })
}

func (c fencedClient) CreateGroup(ctx context.Context, name string, participants []string) (domain.Group, error) {
	return fenced(c, func() (domain.Group, error) { return c.Client.CreateGroup(ctx, name, participants) })
}

func (c fencedClient) UpdateParticipants(ctx context.Context, group string, add, remove []string) (domain.Group, error) {
	return fenced(c, func() (domain.Group, error) { return c.Client.UpdateParticipants(ctx, group, add, remove) })
}

func (c fencedClient) InviteLink(ctx context.Context, group string) (string, error) {
	return fenced(c, func() (string, error) { return c.Client.InviteLink(ctx, group) })
}
