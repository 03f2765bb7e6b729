package orders

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned by StartPostgres when no PostgreSQL server
// binaries are installed.
var ErrNoPostgres = errors.New("orders: no PostgreSQL server binaries (initdb, postgres) under /usr/lib/postgresql/*/bin or on PATH")

// Postgres is a throwaway PostgreSQL server: its own data directory under
// the system's temporary directory, listening on 127.0.0.1 and on a unix
// socket in that directory, with durability settings off (a test server,
// never killed while it matters).
type Postgres struct {
	URL  string // postgres://strata@127.0.0.1:PORT/postgres?sslmode=disable
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// FindPostgres returns the directory holding initdb and postgres: the
// newest /usr/lib/postgresql/<version>/bin (Debian's packages), else PATH.
func FindPostgres() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// StartPostgres initializes and starts a server. initdb refuses to run as
// root, so as root the server runs as the "postgres" user that Debian's
// package creates. Stop it with Stop.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	bin, err := FindPostgres()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-pg-")
	if err != nil {
		return nil, err
	}
	pg := &Postgres{dir: dir, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			pg.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("orders: chown %s to postgres: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "strata", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("orders: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg.log, err = os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	pg.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-k", dir, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=40")
	pg.cmd.Stdout, pg.cmd.Stderr = pg.log, pg.log
	pg.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	setDeathSignal(pg.cmd.SysProcAttr)
	if err := pg.cmd.Start(); err != nil {
		return nil, fmt.Errorf("orders: start postgres: %w", err)
	}
	go func() { pg.cmd.Wait(); close(pg.done) }()
	pg.URL = fmt.Sprintf("postgres://strata@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, pg.URL)
		cancel()
		if err == nil {
			conn.Close(ctx)
			break
		}
		select {
		case <-pg.done:
			return nil, fmt.Errorf("orders: postgres exited: %s", pg.Log())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("orders: postgres not ready in 30s: %w\n%s", err, pg.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ok = true
	return pg, nil
}

// Log returns the server's log so far.
func (pg *Postgres) Log() string {
	b, _ := os.ReadFile(filepath.Join(pg.dir, "postgres.log"))
	return string(b)
}

// Stop shuts the server down (fast shutdown, then SIGKILL after 10 s) and
// removes its directory.
func (pg *Postgres) Stop() {
	if pg.cmd != nil && pg.cmd.Process != nil {
		_ = pg.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-pg.done:
		case <-time.After(10 * time.Second):
			_ = pg.cmd.Process.Kill()
			<-pg.done
		}
	}
	if pg.log != nil {
		pg.log.Close()
	}
	os.RemoveAll(pg.dir)
}

// postgresCredential is nil unless we are root, then the postgres user's.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	uid, gid, err := lookupUser("postgres")
	if err != nil {
		return nil, fmt.Errorf("orders: running as root, and initdb refuses root: %w", err)
	}
	return &syscall.Credential{Uid: uid, Gid: gid}, nil
}

// lookupUser reads /etc/passwd (os/user would need cgo for NSS, and the
// postgres user is a local one).
func lookupUser(name string) (uid, gid uint32, err error) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || f[0] != name {
			continue
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("bad /etc/passwd entry for %s", name)
		}
		return uint32(u), uint32(g), nil
	}
	return 0, 0, fmt.Errorf("no user %q (the postgresql package creates it)", name)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
