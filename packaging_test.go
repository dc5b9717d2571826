package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerInstr is one Dockerfile instruction (continuation lines joined).
type dockerInstr struct {
	cmd, args string
}

func parseDockerfile(t *testing.T, path string) []dockerInstr {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dockerInstr
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// docker build is not available here: the Dockerfile is checked by reading it, and the static
// binary it builds is built the same way and run.
func TestDockerfile(t *testing.T) {
	sideBySide(t)
	instrs := parseDockerfile(t, "Dockerfile")
	var (
		stages                     []string
		user, health, build        string
		exposes, volumes, copyFrom []string
	)
	for _, in := range instrs {
		switch in.cmd {
		case "FROM":
			stages = append(stages, in.args)
		case "USER":
			user = in.args
		case "HEALTHCHECK":
			health = in.args
		case "EXPOSE":
			exposes = append(exposes, in.args)
		case "VOLUME":
			volumes = append(volumes, in.args)
		case "COPY":
			if strings.Contains(in.args, "--from=") {
				copyFrom = append(copyFrom, in.args)
			}
		case "RUN":
			if strings.Contains(in.args, "go build") {
				build = in.args
			}
		}
	}
	if len(stages) < 2 || !strings.Contains(stages[0], " AS build") {
		t.Fatalf("want a multi-stage build with a build stage first, got FROM %q", stages)
	}
	if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
		t.Fatalf("USER %q: want a non-root user", user)
	}
	if !strings.Contains(health, "healthcheck") || !strings.Contains(health, "CMD") {
		t.Fatalf("HEALTHCHECK %q: want the binary's healthcheck (GET /readyz)", health)
	}
	if len(exposes) != 1 || exposes[0] != "8080" {
		t.Fatalf("EXPOSE %q, want 8080", exposes)
	}
	if len(volumes) != 1 || !strings.Contains(volumes[0], `"/data"`) {
		t.Fatalf("VOLUME %q, want /data", volumes)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("the build stage's go build is not static: %q", build)
	}
	binCopied := false
	for _, c := range copyFrom {
		if strings.Contains(c, "--from=build /out/gateway ") {
			binCopied = true
		}
	}
	if !binCopied {
		t.Fatalf("no COPY of /out/gateway from the build stage: %q", copyFrom)
	}

	// Build the binary the way the build stage does, and run it.
	args := regexp.MustCompile(`go build (.*) -o /out/gateway \.`).FindStringSubmatch(build)
	if args == nil {
		t.Fatalf("cannot read the go build flags from %q", build)
	}
	flags := strings.ReplaceAll(args[1], "${VERSION}", "test-static")
	bin := filepath.Join(t.TempDir(), "gateway")
	cmd := exec.Command("sh", "-c", "go build "+flags+" -o "+bin+" .")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "gateway test-static" {
		t.Fatalf("version: %q %v", out, err)
	}
}

func TestComposeAndSystemdUnit(t *testing.T) {
	compose, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"build: .", "8080:8080", "gateway-data:/data"} {
		if !strings.Contains(string(compose), want) {
			t.Errorf("compose.yaml lacks %q", want)
		}
	}
	unit, err := os.ReadFile(filepath.Join("deploy", "gateway.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/local/bin/gateway serve", "User=gateway", "StateDirectory=gateway", "Restart=on-failure", "GATEWAY_DATA=/var/lib/gateway", "[Install]"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("deploy/gateway.service lacks %q", want)
		}
	}
}

// `gateway healthcheck` (the container's HEALTHCHECK) succeeds against a ready gateway and
// fails without one.
func TestHealthcheckCommand(t *testing.T) {
	bin := gatewayBinary(t)
	p := startProc(t, t.TempDir())
	addr := strings.TrimPrefix(p.url, "http://")
	if out, err := exec.Command(bin, "healthcheck", "--addr", addr).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck of a ready gateway: %v %s", err, out)
	}
	cmd := exec.Command(bin, "healthcheck")
	cmd.Env = append(os.Environ(), "GATEWAY_ADDR="+deadAddr(t))
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("healthcheck with nothing listening succeeded: %s", out)
	}
}
