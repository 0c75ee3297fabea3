// Package pgtest runs a throwaway PostgreSQL server for tests, from the
// binaries of Debian's postgresql package: initdb makes a cluster in a
// temporary directory, pg_ctl starts it on a free loopback port with its
// socket in that directory, and the test's cleanup stops it and removes
// everything. PostgreSQL refuses to run as root, so under root (as in CI)
// the server runs as the postgres user the package creates.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	// The driver the Temporal server's postgres12 plugin uses too.
	_ "github.com/lib/pq"
)

// Server is a running PostgreSQL server.
type Server struct {
	// Addr is the loopback host:port it listens on.
	Addr string
	dir  string
	bin  string
	cred *syscall.Credential
	// admin is a superuser connection through the unix socket.
	admin *sql.DB
	mu    sync.Mutex
	n     int
}

// binDir finds the directory of initdb and pg_ctl: Debian keeps them out
// of PATH, under /usr/lib/postgresql/<version>/bin.
func binDir() (string, bool) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major version first.
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isFile(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	return "", false
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Start runs a new PostgreSQL server for the test and stops it when the
// test ends. It skips the test when PostgreSQL is not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, ok := binDir()
	if !ok {
		t.Skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed; install Debian's postgresql package (make test does)")
	}
	s := &Server{bin: bin}
	var owner *user.User
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root and there is no postgres user to run it as (Debian's postgresql package creates one): %v", err)
		}
		owner = u
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: under root its parents are closed to the postgres
	// user, and a unix socket path must stay short.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if owner != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	s.dir = dir
	data := filepath.Join(dir, "data")
	s.run(t, "initdb", "--pgdata", data, "--username", "postgres", "--encoding", "UTF8", "--locale", "C",
		"--auth-local", "trust", "--auth-host", "scram-sha-256", "--no-sync")

	port := freePort(t)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// fsync off: a test cluster need not survive a power cut, and it makes
	// schema set-up several times faster.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", port, dir)
	s.run(t, "pg_ctl", "--pgdata", data, "--log", filepath.Join(dir, "server.log"), "--wait", "--timeout", "120", "--options", opts, "start")
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("postgresql log:\n%s", b)
			}
		}
		if s.admin != nil {
			_ = s.admin.Close()
		}
		cmd := s.command("pg_ctl", "--pgdata", data, "--mode", "immediate", "--wait", "stop")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stop postgresql: %v\n%s", err, out)
		}
	})

	admin, err := sql.Open("postgres", s.socketConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = admin
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("connect to the test postgresql as its superuser: %v", err)
	}
	return s
}

// command runs a PostgreSQL binary, as the postgres user under root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C", "LC_ALL=C", "TZ=UTC"}
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

func (s *Server) run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		t.Fatalf("%s: %v\n%s\n%s", name, err, out, log)
	}
}

// Role is a login role with a password.
type Role struct {
	Name, Password string
}

// NewRole creates a login role with a random password; createdb lets it
// create databases.
func (s *Server) NewRole(t testing.TB, createdb bool) Role {
	t.Helper()
	r := Role{Name: s.name("role"), Password: randomHex(t)}
	opts := "NOCREATEDB"
	if createdb {
		opts = "CREATEDB"
	}
	s.Exec(t, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' %s", r.Name, r.Password, opts))
	return r
}

// NewDatabase creates an empty database owned by owner and returns its name.
func (s *Server) NewDatabase(t testing.TB, owner Role) string {
	t.Helper()
	name := s.name("db")
	s.Exec(t, fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, owner.Name))
	return name
}

// URL is a postgres:// URL that logs in as role to database over TCP.
func (s *Server) URL(role Role, database string) string {
	return (&url.URL{
		Scheme: "postgres", User: url.UserPassword(role.Name, role.Password), Host: s.Addr,
		Path: "/" + database, RawQuery: "sslmode=disable",
	}).String()
}

// Exec runs statements as the superuser.
func (s *Server) Exec(t testing.TB, query string) {
	t.Helper()
	if _, err := s.admin.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Databases lists the databases of the server, templates aside.
func (s *Server) Databases(t testing.TB) []string {
	t.Helper()
	rows, err := s.admin.Query("SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname")
	if err != nil {
		t.Fatal(err)
	}
	// rows.Err below reports what went wrong while reading.
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Query runs a query that returns one value in database, as the superuser.
func (s *Server) Query(t testing.TB, database, query string, dest any) {
	t.Helper()
	db, err := sql.Open("postgres", s.socketConnString(database))
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if err := db.QueryRow(query).Scan(dest); err != nil {
		t.Fatalf("%s in %s: %v", query, database, err)
	}
}

// socketConnString logs in as the superuser through the unix socket, which
// initdb set to trust.
func (s *Server) socketConnString(database string) string {
	_, port, _ := net.SplitHostPort(s.Addr)
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable", s.dir, port, database)
}

// name makes a lower-case identifier unique on this server, safe to use
// unquoted.
func (s *Server) name(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return strings.ToLower(fmt.Sprintf("t_%s%d", kind, s.n))
}

func randomHex(t testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// closeDB closes a pool a test opened, failing the test if that fails.
func closeDB(t testing.TB, db *sql.DB) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Errorf("close database pool: %v", err)
	}
}
