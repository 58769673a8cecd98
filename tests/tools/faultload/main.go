// faultload is the workload client and checker of the fault suite
// (tests/fault/): clients run a workload against a cluster's members
// while the suite's harness injects faults, every operation is recorded
// with its call and return times and its outcome (ok; fail: definitely
// not applied; info: indeterminate), and the history is checked
// afterwards. It runs on etcd 3.4's clientv3 (Debian's
// golang-etcd-server-dev), against cetcd or etcd alike.
//
//	faultload -endpoints URL[,URL...] -workload register|txn|watch|lock|lease \
//	          -seed N -duration 30s -out DIR [-clients 8] [-keys 4] [-timeout 2s]
//	faultload -check DIR [-workload W]
//
// Each client is pinned to one endpoint (client i to endpoint i mod n),
// its home: after 2 timeouts in a row it fails over to the next endpoint,
// and 3 s later tries its home again (worker.go); each operation's ep
// says which member it went through.
// The history goes to DIR/<workload>.jsonl as it is made; SIGTERM or
// SIGINT ends the run early, and what was recorded is still checked.
// The second form checks a saved history again. Both print one summary
// line on stdout, key=value pairs (summary.line: workload, ops, ok,
// fail, info, anomalies, lost, watch_gaps, watch_dups, double_holders,
// longest_unavail_ms, unknown, failovers), which tests/fault/run.sh
// reads, and write the details of every anomaly to DIR/<workload>.anomalies.
// Exit status: 0 clean, 1 anomaly, 2 usage or setup error (no endpoint
// ever answered, a history that cannot be read).
//
// The checkers, one per workload:
//
//	register  linearizability of each key (checkreg.go, linear.go), reads
//	          of values never written, acknowledged writes lost
//	txn       strict serializability of the committed txns, by the
//	          revisions they committed at, acknowledged txns lost
//	          (checktxn.go)
//	watch     every watcher saw every revision of its range once, in
//	          order, with the right prev_kv (checkwatch.go)
//	lock      no two holders at once while their leases lived, no
//	          holder's key gone while its lease lived (checklock.go),
//	          holders on clientv3's Mutex and on etcd's Lock RPC alike
//	lease     no key gone while its lease was surely alive, a lease gone
//	          once and never back, a lapsed lease's keys gone by the
//	          final read (checklease.go)
//
// A linearizability search that exceeds -check-time (the whole check)
// or -check-steps (per key) is reported as unknown=N in the summary and
// as "unknown:" lines in the anomalies file: neither clean nor an anomaly.
//
// Build: GO111MODULE=off GOPATH=/usr/share/gocode go build
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

type config struct {
	endpoints    []string
	workload     string
	seed         int64
	duration     time.Duration
	out          string
	clients      int
	keys         int
	watchers     int
	lockTTL      int64
	lockWait     time.Duration
	lockRPC      float64
	timeout      time.Duration
	serializable float64
	finalWait    time.Duration
	prefix       string
}

var workloads = map[string]func(context.Context, *config, *recorder){
	"register": runRegister,
	"txn":      runTxn,
	"watch":    runWatch,
	"lock":     runLock,
	"lease":    runLease,
}

var checkers = map[string]func([]Op, *summary, checkLimits){
	"register": checkRegister,
	"txn":      checkTxn,
	"watch":    checkWatch,
	"lock":     checkLock,
	"lease":    checkLease,
}

func logf(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "faultload: "+format+"\n", a...)
}

func usage(format string, a ...interface{}) {
	logf(format, a...)
	os.Exit(2)
}

// quietLog keeps the client's retry warnings out of the output: outcomes
// are in the history instead.
var quietLog = func() zap.Config {
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	return c
}()

// dial opens a client of one member without waiting for it: a member
// that is down or cut off makes operations fail (and be recorded), not
// the client's creation.
func dial(ep string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{ep},
		LogConfig: &quietLog,
		// fixed flow-control windows, as tests/tools/kvclient explains
		DialOptions: []grpc.DialOption{
			grpc.WithInitialWindowSize(16 << 20),
			grpc.WithInitialConnWindowSize(64 << 20),
		},
	})
}

func main() {
	var cfg config
	eps := flag.String("endpoints", "", "client URLs of the members, comma separated")
	flag.StringVar(&cfg.workload, "workload", "", "register, txn, watch, lock or lease")
	flag.Int64Var(&cfg.seed, "seed", 1, "seed of the clients' random choices")
	flag.DurationVar(&cfg.duration, "duration", 30*time.Second, "how long the clients run")
	flag.StringVar(&cfg.out, "out", "", "directory for the history and the anomalies")
	flag.IntVar(&cfg.clients, "clients", 8, "number of clients")
	flag.IntVar(&cfg.keys, "keys", 4, "number of keys")
	flag.IntVar(&cfg.watchers, "watchers", 1, "watch, lease: watchers on each member")
	flag.Int64Var(&cfg.lockTTL, "lock-ttl", 5, "lock: TTL of each holder's lease, seconds (more than 1)")
	flag.DurationVar(&cfg.lockWait, "lock-wait", 10*time.Second, "lock: deadline of taking the lock")
	flag.Float64Var(&cfg.lockRPC, "lock-rpc", 0.5, "lock: share of the clients that lock through etcd's Lock RPC (the others: concurrency.Mutex)")
	flag.DurationVar(&cfg.timeout, "timeout", 2*time.Second, "deadline of each operation")
	flag.Float64Var(&cfg.serializable, "serializable", 0, "share of register reads made serializable")
	flag.DurationVar(&cfg.finalWait, "final-wait", 20*time.Second, "how long the final reads try the members")
	flag.StringVar(&cfg.prefix, "prefix", "", "key prefix (default /faultload/<workload>/<start time>/)")
	checkDir := flag.String("check", "", "check the history saved in this directory instead of running")
	checkTime := flag.Duration("check-time", 120*time.Second, "time bound of the whole check")
	checkSteps := flag.Int64("check-steps", 50000000, "step bound of the linearizability search of one key")
	flag.Parse()
	if flag.NArg() > 0 {
		usage("unexpected argument %q", flag.Arg(0))
	}
	lim := checkLimits{maxSteps: *checkSteps,
		text: fmt.Sprintf("-check-time %v for the whole check, -check-steps %d per key", *checkTime, *checkSteps)}

	if *checkDir != "" {
		cfg.out = *checkDir
		if cfg.workload == "" {
			cfg.workload = savedWorkload(cfg.out)
		}
		if checkers[cfg.workload] == nil {
			usage("no checker for workload %q", cfg.workload)
		}
		ops, err := loadHistory(filepath.Join(cfg.out, cfg.workload+".jsonl"))
		if err != nil {
			usage("%v", err)
		}
		lim.deadline = time.Now().Add(*checkTime)
		os.Exit(finish(&cfg, ops, lim))
	}

	if *eps == "" || cfg.out == "" || workloads[cfg.workload] == nil || cfg.clients < 1 || cfg.keys < 1 || cfg.lockTTL < 2 {
		usage("usage: faultload -endpoints URL[,URL...] -workload register|txn|watch|lock|lease -seed N -duration D -out DIR [-clients N] [-keys N] [-timeout D], or faultload -check DIR")
	}
	cfg.endpoints = strings.Split(*eps, ",")
	if cfg.prefix == "" {
		cfg.prefix = fmt.Sprintf("/faultload/%s/%d/", cfg.workload, time.Now().UnixNano())
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		usage("%v", err)
	}
	rec, err := newRecorder(filepath.Join(cfg.out, cfg.workload+".jsonl"))
	if err != nil {
		usage("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	start := time.Now()
	workloads[cfg.workload](ctx, &cfg, rec)
	cancel()
	stop()
	ops, err := rec.close()
	if err != nil {
		usage("writing the history: %v", err)
	}
	took := time.Since(start).Seconds()
	logf("%d operations in %.1f s (%.0f/s)", len(ops), took, float64(len(ops))/took)
	lim.deadline = time.Now().Add(*checkTime)
	os.Exit(finish(&cfg, ops, lim))
}

// savedWorkload is the workload of the one history in dir.
func savedWorkload(dir string) string {
	var found []string
	for w := range checkers {
		if _, err := os.Stat(filepath.Join(dir, w+".jsonl")); err == nil {
			found = append(found, w)
		}
	}
	if len(found) != 1 {
		usage("%s holds %d histories (%s); name one with -workload", dir, len(found), strings.Join(found, ", "))
	}
	return found[0]
}

// finish checks a history, writes the anomalies file, prints the summary
// line and returns the exit status.
func finish(cfg *config, ops []Op, lim checkLimits) int {
	s := summary{workload: cfg.workload}
	s.countOps(ops)
	start := time.Now()
	checkers[cfg.workload](ops, &s, lim)
	logf("checked %d operations in %.2f s", len(ops), time.Since(start).Seconds())
	var text strings.Builder
	for _, d := range s.details {
		text.WriteString(d)
		text.WriteString("\n")
	}
	path := filepath.Join(cfg.out, cfg.workload+".anomalies")
	if err := ioutil.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		logf("%v", err)
		return 2
	}
	fmt.Println(s.line())
	switch {
	case !s.clean():
		return 1
	case s.ok == 0:
		logf("%v", errors.New("no operation succeeded: no endpoint ever answered"))
		return 2
	}
	return 0
}
