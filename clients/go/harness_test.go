package queen

// The test harness: real brokers (QUEEN_BIN serve) on the private
// PostgreSQL that scripts/test.sh starts (QUEEN_TEST_PG_URL).

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

type broker struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process exited
	port   int
	base   string
	log    string
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func needBrokerEnv(t *testing.T) (bin, pg string) {
	bin, pg = os.Getenv("QUEEN_BIN"), os.Getenv("QUEEN_TEST_PG_URL")
	if bin == "" || pg == "" {
		t.Skip("QUEEN_BIN and QUEEN_TEST_PG_URL are unset: run through make test-go")
	}
	return bin, pg
}

// spawnBroker starts `queen serve` on a free port; it does not wait.
func spawnBroker(t *testing.T, env ...string) *broker {
	bin, pg := needBrokerEnv(t)
	b := &broker{port: freePort(t)}
	b.base = fmt.Sprintf("http://127.0.0.1:%d", b.port)
	b.log = filepath.Join(os.TempDir(), fmt.Sprintf("queen-go-test-broker-%d-%d.log", os.Getpid(), b.port))
	f, err := os.Create(b.log)
	if err != nil {
		t.Fatalf("broker log: %v", err)
	}
	defer f.Close()
	b.cmd = exec.Command(bin, "serve")
	b.cmd.Env = append(os.Environ(), "QUEEN_PG_URL="+pg, fmt.Sprintf("QUEEN_PORT=%d", b.port),
		"QUEEN_BIND=127.0.0.1")
	b.cmd.Env = append(b.cmd.Env, env...)
	b.cmd.Stdout, b.cmd.Stderr = f, f
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	b.exited = make(chan struct{})
	go func() { b.cmd.Wait(); close(b.exited) }()
	return b
}

// startBroker spawns a broker and waits until /health answers 200.
func startBroker(t *testing.T, env ...string) *broker {
	b := spawnBroker(t, env...)
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-b.exited:
			deadline = time.Now()
			continue
		default:
		}
		resp, err := hc.Get(b.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return b
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.stop()
	log, _ := os.ReadFile(b.log)
	t.Fatalf("the broker never became healthy: %s", log)
	return nil
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 30 s).
func (b *broker) stop() {
	if b == nil || b.cmd == nil || b.cmd.Process == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
	}
	b.cmd = nil
	os.Remove(b.log)
}

// psql runs one statement on the test database.
func psql(t *testing.T, sql string) {
	_, pg := needBrokerEnv(t)
	out, err := exec.Command("psql", pg, "-qtAc", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %s: %v: %s", sql, err, out)
	}
}
