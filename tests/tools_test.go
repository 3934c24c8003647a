package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Real tools on lsmfs: the Go toolchain building a program that lives on the
// mount with its build cache on the mount, git cloning onto the mount and
// checking the repository, and SQLite keeping a database on the mount. Each
// runs as a subprocess of the test (the daemon is one too), and each result
// is checked again after a remount.

// TestToolsGoBuild builds and runs a two-package Go program whose sources,
// build cache (GOCACHE) and output are on the mount, tests it with go test,
// and rebuilds it from the cache after a remount.
func TestToolsGoBuild(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			t.Skip("skipped: no go command in PATH or GOROOT")
		}
	}
	f := newFS(t, fsOptions{})
	src := f.path("src", "hello")
	files := map[string]string{
		"go.mod": "module example.com/hello\n\ngo 1.22\n",
		"main.go": `package main

import (
	"fmt"

	"example.com/hello/sum"
)

func main() { fmt.Println(sum.Hex("lsmfs")) }
`,
		"sum/sum.go": `// Package sum hashes strings.
package sum

import (
	"crypto/sha256"
	"encoding/hex"
)

// Hex is the hex SHA-256 of s.
func Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
`,
		"sum/sum_test.go": `package sum

import "testing"

func TestHex(t *testing.T) {
	if got := Hex(""); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatal(got)
	}
}
`,
	}
	for name, text := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const want = "ac5a78677911388ef31dedd57a1b82227ba643ab22ba735f7f78913f4088e6e3" // sha256("lsmfs")
	script := fmt.Sprintf(`
export GOCACHE=%s GOTMPDIR=%s GOPATH=%s
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOPROXY=off GOWORK=off CGO_ENABLED=0
mkdir -p "$GOTMPDIR"
%s build -o ../bin/hello .
../bin/hello
%s test ./...
`, f.path("gocache"), f.path("gotmp"), f.path("gopath"), goBin, goBin)
	start := time.Now()
	out := sh(t, src, script)
	t.Logf("go build and go test with an empty cache on the mount: %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, want) {
		t.Fatalf("the program built on the mount printed:\n%s\nwant %s", out, want)
	}
	if !strings.Contains(out, "ok  \texample.com/hello/sum") {
		t.Fatalf("go test on the mount:\n%s", out)
	}

	f.remount()
	// From the cache kept on the mount: no recompilation of the program.
	out = sh(t, src, script+"\n"+goBin+" build -x -o ../bin/hello2 . 2>&1 | grep -c /compile || true\n")
	if !strings.Contains(out, want) {
		t.Fatalf("after a remount the program printed:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != "0" {
		t.Errorf("after a remount go build recompiled %s packages despite the cache on the mount:\n%s", last, out)
	}
}

// TestToolsGit clones a local repository onto the mount, checks it with
// git fsck, repacks it (git gc reads and writes packs through mmap), checks
// it again, clones the clone on the mount itself, and checks everything
// again after a remount.
func TestToolsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipped: git not installed (package git)")
	}
	f := newFS(t, fsOptions{})
	// A source repository on the host: some of the Go tree's sources, then
	// a few commits of changes, renames and deletions.
	origin := filepath.Join(t.TempDir(), "origin")
	goSrc := filepath.Join(runtime.GOROOT(), "src")
	sh(t, t.TempDir(), fmt.Sprintf(`
mkdir -p %[1]s && cd %[1]s
git init -q -b main .
for d in bufio strings sort container encoding/json; do
	mkdir -p "$(dirname "$d")" && cp -r %[2]s/"$d" "$d"
done
git add -A && git commit -q -m initial
for i in 1 2 3 4 5; do
	echo "change $i" >> strings/strings.go
	git mv sort sort$i 2>/dev/null || git mv sort$((i-1)) sort$i
	if [ $i = 1 ]; then git rm -q -r container/ring; fi
	git commit -q -a -m "change $i"
done
git checkout -q -b side HEAD~2 && echo side > side.txt && git add side.txt && git commit -q -m side
git checkout -q main
git tag v1 HEAD~1
`, origin, goSrc))
	wantHead := strings.TrimSpace(sh(t, origin, "git rev-parse main side v1"))

	check := func(when string) {
		t.Helper()
		for _, repo := range []string{"clone", "clone2"} {
			out := sh(t, f.path(repo), "git fsck --full --strict --no-progress 2>&1; git rev-parse main side v1; git status --porcelain")
			if !strings.Contains(out, wantHead) {
				t.Fatalf("%s: %s: git fsck, rev-parse and status say:\n%s\nwant refs\n%s", when, repo, out, wantHead)
			}
			if strings.Contains(out, "error") || strings.Contains(out, "missing") || strings.Contains(out, "??") {
				t.Fatalf("%s: %s:\n%s", when, repo, out)
			}
		}
	}
	sh(t, f.mnt, fmt.Sprintf(`
git clone -q --no-hardlinks %s clone
cd clone && git branch -q side origin/side
git fsck --full --strict --no-progress
git gc -q --aggressive --prune=now
git fsck --full --strict --no-progress
cd .. && git clone -q file://%s clone2 && cd clone2 && git branch -q side origin/side
`, origin, f.path("clone")))
	// The checked-out files match the origin's.
	out := sh(t, f.mnt, fmt.Sprintf("diff -r -x .git %s clone && diff -r -x .git clone clone2 && echo same", origin))
	if !strings.Contains(out, "same") {
		t.Fatalf("checked-out trees differ:\n%s", out)
	}
	check("after clone and gc")
	f.remount()
	check("after a remount")
}

// TestToolsSQLite drives SQLite databases on the mount, in rollback-journal
// and in WAL mode (which maps its -shm file shared and locks it with
// fcntl), from one process and then from two processes writing at once,
// and checks them with PRAGMA integrity_check, before and after a
// remount: 5,000 rows of up to 3 KiB, 100,000 with LSMFS_LONG=1. The
// sqlite3 command comes from Debian's sqlite3 package.
func TestToolsSQLite(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("skipped: the sqlite3 command is not installed (Debian package sqlite3)")
	}
	f := newFS(t, fsOptions{})
	rows := 5000
	if long() {
		rows = 100_000
	}
	for _, mode := range []string{"delete", "wal"} {
		db := f.path(mode + ".db")
		sh(t, f.mnt, fmt.Sprintf(`
sqlite3 %[1]s <<'EOF'
PRAGMA journal_mode=%[2]s;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB);
CREATE INDEX t_k ON t(k);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < %[3]d)
INSERT INTO t(k, v) SELECT hex(randomblob(8)), randomblob(200 + abs(random()) %% 3000) FROM n;
UPDATE t SET v = randomblob(100) WHERE id %% 7 = 0;
DELETE FROM t WHERE id %% 11 = 0;
EOF
# Two writers at once: SQLite's fcntl locks (and, in WAL mode, the mapped
# -shm index) keep them apart; busy_timeout makes them wait.
for w in 1 2; do
	sqlite3 -cmd '.timeout 60000' %[1]s "
		BEGIN IMMEDIATE;
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 500)
		INSERT INTO t(k, v) SELECT 'writer$w', randomblob(1000) FROM n;
		COMMIT;" &
done
wait
for i in $(seq 1 50); do
	echo "INSERT INTO t(k, v) VALUES ('single', randomblob(5000));"
done | sqlite3 -cmd '.timeout 60000' %[1]s
`, db, mode, rows))
		checkSQLite(t, db, rows)
	}
	f.remount()
	for _, mode := range []string{"delete", "wal"} {
		checkSQLite(t, f.path(mode+".db"), rows)
	}
}

// checkSQLite runs PRAGMA integrity_check and counts the rows.
func checkSQLite(t *testing.T, db string, rows int) {
	t.Helper()
	out := sh(t, filepath.Dir(db), fmt.Sprintf(
		`sqlite3 %s "PRAGMA integrity_check; SELECT count(*) FROM t; SELECT count(*) FROM t WHERE k LIKE 'writer%%';"`, db))
	deleted := rows / 11
	want := fmt.Sprintf("ok\n%d\n1000\n", rows-deleted+1000+50)
	if out != want {
		t.Fatalf("%s: integrity_check and counts:\n%s\nwant\n%s", filepath.Base(db), out, want)
	}
}
