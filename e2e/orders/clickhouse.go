package orders

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoClickHouse is returned by StartClickHouse when no clickhouse-server
// binary is installed.
var ErrNoClickHouse = errors.New("orders: no clickhouse-server on PATH, in /usr/sbin or in /usr/bin")

// ClickHouse is a throwaway ClickHouse server: a config of its own and
// every file it writes (data, metadata, logs, temporary files) in one
// directory under the system's temporary directory, the native protocol
// on a free port of 127.0.0.1 and no other listener (no HTTP, no
// interserver port). /etc/clickhouse-server and /var/lib/clickhouse are
// not read or written.
type ClickHouse struct {
	URL  string // clickhouse://127.0.0.1:PORT
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *os.File
}

// FindClickHouse returns the path of clickhouse-server: on PATH, else
// where Debian's clickhouse-server package puts it (/usr/sbin), else
// /usr/bin.
func FindClickHouse() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if isExec(p) {
			return p, nil
		}
	}
	return "", ErrNoClickHouse
}

// StartClickHouse starts a server and waits (30 s) until it answers a
// ping over the native protocol. Stop it with Stop.
func StartClickHouse(ctx context.Context) (*ClickHouse, error) {
	bin, err := FindClickHouse()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-clickhouse-")
	if err != nil {
		return nil, err
	}
	ch := &ClickHouse{dir: dir, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			ch.Stop()
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(clickHouseConfig(dir, port)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(clickHouseUsers), 0o644); err != nil {
		return nil, err
	}
	ch.out, err = os.Create(filepath.Join(dir, "stdout.log"))
	if err != nil {
		return nil, err
	}
	ch.cmd = exec.Command(bin, "--config-file="+filepath.Join(dir, "config.xml"))
	ch.cmd.Dir = dir
	ch.cmd.Stdout, ch.cmd.Stderr = ch.out, ch.out
	ch.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(ch.cmd.SysProcAttr)
	if err := ch.cmd.Start(); err != nil {
		return nil, fmt.Errorf("orders: start %s: %w", bin, err)
	}
	go func() { ch.cmd.Wait(); close(ch.done) }()
	ch.URL = fmt.Sprintf("clickhouse://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = pingClickHouse(cctx, ch.URL)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ch.done:
			return nil, fmt.Errorf("orders: clickhouse-server exited: %s", ch.Log())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("orders: clickhouse-server not ready in 30s: %w\n%s", err, ch.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	ok = true
	return ch, nil
}

func pingClickHouse(ctx context.Context, url string) error {
	conn, err := OpenClickHouse(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close()
}

// Log returns the server's output and its error log so far.
func (ch *ClickHouse) Log() string {
	var b strings.Builder
	for _, name := range []string{"stdout.log", "clickhouse-server.err.log"} {
		if s, err := os.ReadFile(filepath.Join(ch.dir, name)); err == nil && len(s) > 0 {
			fmt.Fprintf(&b, "--- %s:\n%s", name, s)
		}
	}
	return b.String()
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 10 s) and
// removes its directory.
func (ch *ClickHouse) Stop() {
	if ch.cmd != nil && ch.cmd.Process != nil {
		_ = ch.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-ch.done:
		case <-time.After(10 * time.Second):
			_ = ch.cmd.Process.Kill()
			<-ch.done
		}
	}
	if ch.out != nil {
		ch.out.Close()
	}
	os.RemoveAll(ch.dir)
}

// clickHouseConfig is a whole server config: the root element <yandex>
// is what 18.16 (Debian 12's) reads, and newer servers still accept it.
// Small caches: a test server, sharing the machine.
func clickHouseConfig(dir string, port int) string {
	p := func(name string) string { return filepath.Join(dir, name) + "/" }
	return `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>` + filepath.Join(dir, "clickhouse-server.log") + `</log>
        <errorlog>` + filepath.Join(dir, "clickhouse-server.err.log") + `</errorlog>
        <size>100M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>` + strconv.Itoa(port) + `</tcp_port>
    <path>` + p("data") + `</path>
    <tmp_path>` + p("tmp") + `</tmp_path>
    <user_files_path>` + p("user_files") + `</user_files_path>
    <format_schema_path>` + p("format_schemas") + `</format_schema_path>
    <users_config>` + filepath.Join(dir, "users.xml") + `</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>67108864</mark_cache_size>
    <uncompressed_cache_size>67108864</uncompressed_cache_size>
    <max_concurrent_queries>50</max_concurrent_queries>
</yandex>
`
}

// clickHouseUsers: the user "default", no password, from 127.0.0.1 only.
const clickHouseUsers = `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default></default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`
