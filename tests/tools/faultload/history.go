package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Op is one line of a history. Every line has proc, f, call_ns, ret_ns,
// type and ep (tests/fault/lib.sh reads them to time recoveries); the
// other fields belong to one workload or another and are left out when
// empty.
type Op struct {
	Proc   int    `json:"proc"`
	F      string `json:"f"`
	Call   int64  `json:"call_ns"`
	Ret    int64  `json:"ret_ns"`
	Type   string `json:"type"`
	Ep     string `json:"ep"`
	Client int    `json:"client"`
	Err    string `json:"error,omitempty"`
	// Final marks the reads made after the run to learn the end state;
	// they are part of the history but not of the run's availability.
	Final bool `json:"final,omitempty"`
	// Rev is the header revision of an ok answer.
	Rev int64 `json:"rev,omitempty"`

	// register: key; value written (write, cas); value expected (cas);
	// value read (read, or the current value a cas that did not apply
	// read in its else branch), found=false when the key was absent.
	Key          string `json:"key,omitempty"`
	Value        string `json:"value,omitempty"`
	Expect       string `json:"expect,omitempty"`
	Read         string `json:"read,omitempty"`
	Found        bool   `json:"found,omitempty"`
	Succeeded    bool   `json:"succeeded,omitempty"`
	Serializable bool   `json:"serializable,omitempty"`

	// txn: the keys read (a read's snapshot; the values and mod
	// revisions a txn compared), the values a txn put, and what the else
	// branch of a txn whose compares failed read.
	Reads  []KV `json:"reads,omitempty"`
	Writes []KV `json:"writes,omitempty"`
	Else   []KV `json:"else,omitempty"`

	// watch: the events of one answer; the revision a watch was opened
	// from; the compact revision a watch cancelled for compaction named.
	Events     []Event `json:"events,omitempty"`
	StartRev   int64   `json:"start_rev,omitempty"`
	CompactRev int64   `json:"compact_rev,omitempty"`

	// lock: the lease a holder kept alive and its TTL in seconds, the key
	// that held the lock, and for an unlock the end of the hold's part
	// during which the lease was surely alive.
	Lease   int64  `json:"lease,omitempty"`
	TTL     int64  `json:"ttl,omitempty"`
	LockKey string `json:"lock_key,omitempty"`
	ValidNs int64  `json:"valid_ns,omitempty"`
	// RPC marks a lock or unlock made through etcd's Lock RPC (v3lock)
	// rather than clientv3's concurrency.Mutex.
	RPC bool `json:"rpc,omitempty"`

	// lease: the lease of a grant, keepalive or write (lease above; ttl:
	// as granted or answered); gone when the server said the lease does
	// not exist.
	Gone bool `json:"gone,omitempty"`
}

// Event is one watch event as a watcher got it, with its prev_kv
// (prev_mod 0: none).
type Event struct {
	Type    string `json:"type"` // put or delete
	Key     string `json:"key"`
	Value   string `json:"value,omitempty"`
	Mod     int64  `json:"mod"`
	PrevVal string `json:"prev_value,omitempty"`
	PrevMod int64  `json:"prev_mod,omitempty"`
}

// KV is a key with its value and mod revision (found=false, mod 0: the
// key was absent).
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	Found bool   `json:"found,omitempty"`
	Mod   int64  `json:"mod,omitempty"`
}

const (
	typeOK   = "ok"
	typeFail = "fail"
	typeInfo = "info"
)

// outcome says how an error leaves an operation: "fail" when the server
// definitely did not apply it, "info" when it may have (a timeout, a lost
// connection, an answer that is not a clean refusal). Reads are
// classified the same way, though for a read both mean "no effect". The
// second result is the error's text for the history.
func outcome(err error) (string, string) {
	if err == nil {
		return typeOK, ""
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return typeInfo, err.Error()
	}
	// clientv3 hands etcd's own errors over as rpctypes.EtcdError, the
	// others as gRPC statuses; anything else (Unknown) is indeterminate
	code := status.Code(err)
	if ee, ok := err.(rpctypes.EtcdError); ok {
		code = ee.Code()
	}
	msg := rpctypes.ErrorDesc(err)
	text := code.String() + ": " + msg
	switch code {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.ResourceExhausted,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented,
		codes.Unauthenticated:
		// refused before it was proposed
		return typeFail, text
	case codes.Unknown:
		// raft's ErrProposalDropped: the proposal never entered the
		// log (etcd 3.4 maps it to no gRPC code)
		if msg == "raft proposal dropped" {
			return typeFail, text
		}
	}
	// Unavailable (no leader, request timed out, leader changed, the
	// connection), DeadlineExceeded, Canceled, Aborted, Internal, any other
	// Unknown: the request may have been applied.
	return typeInfo, text
}

// recorder appends each finished operation to the history file as it
// completes and keeps it for the checkers. Safe for many goroutines.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	ops []Op
	err error
}

func newRecorder(path string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (r *recorder) add(op Op) {
	b, err := json.Marshal(&op)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	if err == nil {
		b = append(b, '\n')
		_, err = r.w.Write(b)
	}
	if err != nil && r.err == nil {
		r.err = err
	}
}

// close flushes the file and returns the history in the order the
// operations completed.
func (r *recorder) close() ([]Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.ops, r.err
}

// loadHistory reads a history file; a line that is not an operation (not
// JSON, no type, a return before its call) is an error naming the line.
func loadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var op Op
		if err := json.Unmarshal([]byte(text), &op); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		switch op.Type {
		case typeOK, typeFail, typeInfo:
		default:
			return nil, fmt.Errorf("%s:%d: type %q is none of ok, fail, info", path, line, op.Type)
		}
		if op.F == "" {
			return nil, fmt.Errorf("%s:%d: no operation name (f)", path, line)
		}
		if op.Ret < op.Call {
			return nil, fmt.Errorf("%s:%d: ret_ns %d is before call_ns %d", path, line, op.Ret, op.Call)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return ops, nil
}

// summary is what the one stdout line says of a run.
type summary struct {
	workload                              string
	ops, ok, fail, info                   int
	anomalies, lost, watchGaps, watchDups int
	doubleHolders                         int
	unknown                               int
	longestUnavailMs                      int64
	failovers                             int
	details                               []string
}

func (s *summary) anomaly(format string, a ...interface{}) {
	s.anomalies++
	s.details = append(s.details, fmt.Sprintf(format, a...))
}

func (s *summary) line() string {
	return fmt.Sprintf("workload=%s ops=%d ok=%d fail=%d info=%d anomalies=%d lost=%d watch_gaps=%d watch_dups=%d double_holders=%d longest_unavail_ms=%d unknown=%d failovers=%d",
		s.workload, s.ops, s.ok, s.fail, s.info, s.anomalies, s.lost, s.watchGaps, s.watchDups,
		s.doubleHolders, s.longestUnavailMs, s.unknown, s.failovers)
}

func (s *summary) clean() bool {
	return s.anomalies == 0 && s.lost == 0 && s.watchGaps == 0 && s.watchDups == 0 && s.doubleHolders == 0
}

// countOps fills the counts, longest_unavail_ms: the longest stretch,
// between the first call and the last return of the run's operations
// (the final reads left out), in which no operation of any client
// returned ok, and failovers: how many times a client's operation went
// through another member than its previous one and than its first one
// (its home; the move back home is not counted).
func (s *summary) countOps(ops []Op) {
	s.ops = len(ops)
	var rets []int64
	first, last := int64(0), int64(0)
	home, was := map[int]string{}, map[int]string{}
	for i := range ops {
		op := &ops[i]
		switch op.Type {
		case typeOK:
			s.ok++
		case typeFail:
			s.fail++
		case typeInfo:
			s.info++
		}
		if op.Final {
			continue
		}
		if h, seen := home[op.Client]; !seen {
			home[op.Client] = op.Ep
		} else if op.Ep != was[op.Client] && op.Ep != h {
			s.failovers++
		}
		was[op.Client] = op.Ep
		if first == 0 || op.Call < first {
			first = op.Call
		}
		if op.Ret > last {
			last = op.Ret
		}
		if op.Type == typeOK {
			rets = append(rets, op.Ret)
		}
	}
	sort.Slice(rets, func(i, j int) bool { return rets[i] < rets[j] })
	prev, gap := first, int64(0)
	for _, t := range rets {
		if t-prev > gap {
			gap = t - prev
		}
		prev = t
	}
	if last-prev > gap {
		gap = last - prev
	}
	s.longestUnavailMs = gap / 1e6
}
