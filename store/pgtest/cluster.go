package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// superuser is the bootstrap role initdb creates; the throwaway cluster trusts
// it on loopback only, so no password is involved.
const superuser = "postgres"

// startAttempts bounds retries when the free port we picked is taken by
// someone else before postgres binds it.
const startAttempts = 3

// readyTimeout bounds how long a fresh postmaster may take to accept
// connections (initdb has already run by then; this is normally < 1 s).
const readyTimeout = 30 * time.Second

// binaries are the absolute paths of the server programs pgtest runs.
type binaries struct {
	initdb, postgres string
}

// cluster is one throwaway Postgres server: its files, its port, and the
// watchdog process that keeps it from outliving the test process.
type cluster struct {
	bin   binaries
	runAs *user.User // nil: run as the current user
	root  string     // temp dir holding data/, sock/ and the log
	port  int
	// durable: a commit is written (not fsynced) before it is
	// acknowledged, so it survives the server being killed — what a
	// Cluster that restarts needs; the shared cluster skips even that.
	durable bool
	cmd     *exec.Cmd      // the watchdog (runuser →) sh → postgres
	stdin   io.WriteCloser // closing it makes the watchdog stop postgres
	exited  chan struct{}  // closed when cmd has exited
}

// watchdog ($1: the temp root, then the postgres command line) starts
// postgres in the background and, as soon as its stdin reaches EOF, stops it
// (SIGQUIT, the immediate shutdown) and removes the temp root. EOF comes when
// Main closes the pipe or when the test process dies for any reason, even
// SIGKILL, so a killed test leaves neither a server nor its files behind. The
// reader runs in a subshell reading a duplicate of stdin (fd 3), because a
// background job's own stdin is /dev/null. The shell itself exits when
// postgres does, so a postgres that fails to start is noticed at once. A line
// "keep" before the EOF stops postgres the same way but keeps the files, so
// a Cluster can start the server again on the same data.
const watchdog = `root=$1; shift
exec 3<&0
"$@" &
pid=$!
(
	line=
	read -r line <&3
	kill -QUIT "$pid" 2>/dev/null
	n=0; while kill -0 "$pid" 2>/dev/null && [ "$n" -lt 100 ]; do sleep 0.1; n=$((n+1)); done
	[ "$line" = keep ] || rm -rf "$root"
) &
wait "$pid"
`

// startCluster initializes and starts a fresh cluster on a free loopback port
// and waits until it accepts connections.
func startCluster(ctx context.Context) (*cluster, error) { return startClusterWith(ctx, false) }

// startClusterWith is startCluster, durable when asked (see cluster.durable).
func startClusterWith(ctx context.Context, durable bool) (*cluster, error) {
	bin, err := findBinaries("/usr/lib/postgresql", exec.LookPath)
	if err != nil {
		return nil, err
	}
	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := newCluster(ctx, bin, runAs, durable)
		if err == nil || attempt == startAttempts {
			return c, err
		}
	}
}

// newCluster makes one attempt: a new temp root, initdb, start. Every attempt
// gets its own root because a failed attempt's watchdog removes its root.
func newCluster(ctx context.Context, bin binaries, runAs *user.User, durable bool) (*cluster, error) {
	root, err := os.MkdirTemp(tempParent(), "opsgate-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	c := &cluster{bin: bin, runAs: runAs, root: root, durable: durable}
	err = c.init(ctx)
	if err == nil {
		err = c.start(ctx)
	}
	if err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	return c, nil
}

// serverUser decides who runs the server: the current user, or "postgres"
// when we are root, because initdb and postgres refuse to run as root.
func serverUser() (*user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no postgres user to run it as: %w", err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return nil, fmt.Errorf("running as root needs runuser to switch to the postgres user: %w", err)
	}
	return u, nil
}

// init creates the data and socket directories (owned by the server user)
// and runs initdb.
func (c *cluster) init(ctx context.Context) error {
	for _, dir := range []string{c.root, c.dataDir(), c.sockDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if err := c.chown(dir); err != nil {
			return err
		}
	}
	// -N: no fsync of the new files; the cluster lives for one test process.
	// --no-locale: C collation, the same on every machine.
	args := []string{"-D", c.dataDir(), "-U", superuser, "-A", "trust", "-E", "UTF8", "--no-locale", "-N"}
	var out bytes.Buffer
	cmd := c.command(ctx, c.bin.initdb, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, tail(out.Bytes()))
	}
	return nil
}

// start runs postgres under the watchdog on a newly picked free port and
// waits until it accepts connections or exits.
func (c *cluster) start(ctx context.Context) error {
	if c.port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.port = port
	}
	port := c.port
	logPath := filepath.Join(c.root, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create server log: %w", err)
	}
	defer logFile.Close() // the child keeps its own descriptor
	if err := c.chown(logPath); err != nil {
		return err
	}
	args := []string{"-c", watchdog, "pgtest-watchdog", c.root, c.bin.postgres,
		"-D", c.dataDir(),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + c.sockDir(),
		// Durability is pointless for a throwaway cluster; speed is not.
		"-c", "fsync=off",
		"-c", "synchronous_commit=" + map[bool]string{true: "on", false: "off"}[c.durable],
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	}
	// Not CommandContext: the server must outlive ctx and stop only in stop.
	cmd := c.command(context.Background(), "/bin/sh", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("watchdog stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd, c.stdin, c.exited = cmd, stdin, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(c.exited)

	if err := c.waitReady(ctx); err != nil {
		log, _ := os.ReadFile(logPath) // before the watchdog removes it
		_ = c.stdin.Close()
		<-c.exited
		return fmt.Errorf("postgres did not become ready on 127.0.0.1:%d: %w: %s", port, err, tail(log))
	}
	return nil
}

// waitReady polls until the server accepts a connection, exits, or the
// bounded wait runs out.
func (c *cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		connCtx, connCancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(connCtx, c.adminDSN())
		connCancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.exited:
			return errors.New("server exited")
		case <-ctx.Done():
			return fmt.Errorf("waiting: %w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// halt stops the server the way stop does (SIGQUIT, an immediate shutdown:
// the next start recovers from the WAL, as after a crash) but keeps its
// files, so start can run it again on the same data and port.
func (c *cluster) halt() error {
	if _, err := io.WriteString(c.stdin, "keep\n"); err != nil {
		return fmt.Errorf("tell the watchdog to keep the data: %w", err)
	}
	_ = c.stdin.Close()
	select {
	case <-c.exited:
		return nil
	case <-time.After(readyTimeout):
		_ = c.cmd.Process.Kill()
		return errors.New("postgres did not stop after SIGQUIT; killed its watchdog")
	}
}

// stop shuts the server down, waits for it and removes all files. Closing the
// watchdog's stdin makes it send SIGQUIT, which is exactly what
// `pg_ctl stop -m immediate` sends (nothing in a throwaway cluster is worth a
// clean checkpoint); running pg_ctl as well would race with the watchdog's
// removal of the data directory.
func (c *cluster) stop() error {
	var errs []error
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(readyTimeout):
		_ = c.cmd.Process.Kill()
		errs = append(errs, errors.New("postgres did not stop after SIGQUIT; killed its watchdog"))
	}
	// The watchdog removes the root too, concurrently; either may finish it.
	if err := os.RemoveAll(c.root); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.root, err))
	}
	return errors.Join(errs...)
}

// adminDSN is the superuser's DSN over TCP on loopback.
func (c *cluster) adminDSN() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", superuser, c.port)
}

func (c *cluster) dataDir() string { return filepath.Join(c.root, "data") }
func (c *cluster) sockDir() string { return filepath.Join(c.root, "sock") }

// command builds a command that runs as the server user: through
// `runuser -u postgres --` when we are root, directly otherwise. It runs in
// the temp dir so the server user never needs access to our working dir.
func (c *cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if c.runAs != nil {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs.Username, "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Dir = c.root
	return cmd
}

// chown hands path to the server user when we run it as someone else.
func (c *cluster) chown(path string) error {
	if c.runAs == nil {
		return nil
	}
	uid, err := strconv.Atoi(c.runAs.Uid)
	if err != nil {
		return fmt.Errorf("uid of %s: %w", c.runAs.Username, err)
	}
	gid, err := strconv.Atoi(c.runAs.Gid)
	if err != nil {
		return fmt.Errorf("gid of %s: %w", c.runAs.Username, err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, c.runAs.Username, err)
	}
	return nil
}

// findBinaries prefers the newest version under libRoot (Debian's
// /usr/lib/postgresql/<major>/bin layout) and falls back to $PATH.
func findBinaries(libRoot string, lookPath func(string) (string, error)) (binaries, error) {
	entries, _ := os.ReadDir(libRoot)
	type version struct {
		major int
		dir   string
	}
	var versions []version
	for _, e := range entries {
		major, err := strconv.Atoi(strings.SplitN(e.Name(), ".", 2)[0])
		if err != nil {
			continue
		}
		dir := filepath.Join(libRoot, e.Name(), "bin")
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres")) {
			versions = append(versions, version{major, dir})
		}
	}
	if len(versions) > 0 {
		newest := slices.MaxFunc(versions, func(a, b version) int { return a.major - b.major })
		return binaries{
			initdb:   filepath.Join(newest.dir, "initdb"),
			postgres: filepath.Join(newest.dir, "postgres"),
		}, nil
	}
	var b binaries
	for _, p := range []struct {
		name string
		dst  *string
	}{{"initdb", &b.initdb}, {"postgres", &b.postgres}} {
		path, err := lookPath(p.name)
		if err != nil {
			return binaries{}, fmt.Errorf("no Postgres server binaries in %s/*/bin or $PATH (install the postgresql package): %w", libRoot, err)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return binaries{}, fmt.Errorf("absolute path of %s: %w", path, err)
		}
		*p.dst = abs
	}
	return b, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// freePort asks the kernel for a free loopback port. Another process may take
// it before postgres binds it; start retries with a new port in that case.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the end of a log, where the reason for a failure usually is.
func tail(b []byte) string {
	const max = 2000
	b = bytes.TrimSpace(b)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
