package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/mvcc/mvccpb"
)

// runWatch is the watch workload: the clients put unique values to the
// keys of one range while -watchers watchers on every member watch the
// range, with prev_kv, from the revision after the one the run started
// at. A watch that ends (its member lost the leader: the watchers
// require one; cancelled by the server) is opened again from the
// revision after the last event seen, or from the compact revision the
// server named. After the run an end marker is put in the range; each
// watcher has -final-wait to see it, then a final Range of the range is
// read.
//
// History lines of the watchers (client and proc: the watcher's number,
// after the clients'): watch-open (start_rev), watch (the events of one
// answer; call and return are when it came), watch-cancel (the server
// ended the watch; compact_rev when for compaction), watch-end (rev: the
// end marker's revision; ok: the watcher saw it; fail: it did not though
// its member answers; info: its member does not answer).
func runWatch(ctx context.Context, cfg *config, rec *recorder) {
	prefix := cfg.prefix + "w/"
	keys := workloadKeys(cfg, "w/")
	start, err := startRevision(cfg)
	if err != nil {
		logf("no member told the current revision: %v", err)
		return
	}
	last, stopWatchers := startWatchers(cfg, rec, prefix, start)
	runWorkers(ctx, cfg, rec, func(ctx context.Context, w *worker) {
		for seq := 0; ctx.Err() == nil; seq++ {
			op := Op{F: "write", Key: keys[w.rng.Intn(len(keys))], Value: fmt.Sprintf("c%d-%d", w.id, seq)}
			w.do(&op, func(ctx context.Context) error {
				resp, err := w.cli.Put(ctx, op.Key, op.Value)
				if err == nil {
					op.Rev = resp.Header.Revision
				}
				return err
			})
		}
	})

	var endRev int64
	finalOp(cfg, rec, "write", func(ctx context.Context, cli *clientv3.Client, op *Op) error {
		op.Key, op.Value = prefix+"end", "end"
		resp, err := cli.Put(ctx, op.Key, op.Value)
		if err == nil {
			op.Rev = resp.Header.Revision
			endRev = op.Rev
		}
		return err
	})
	reached := func(i int) bool { return endRev != 0 && atomic.LoadInt64(&last[i]) >= endRev }
	for end := time.Now().Add(cfg.finalWait); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		all := true
		for i := range last {
			all = all && reached(i)
		}
		if all {
			break
		}
	}
	stopWatchers()
	for i := range last {
		op := Op{Proc: cfg.clients + i, Client: cfg.clients + i, Ep: cfg.endpoints[i%len(cfg.endpoints)],
			F: "watch-end", Final: true, Rev: endRev, Type: typeOK}
		op.Call = time.Now().UnixNano()
		if !reached(i) {
			op.Type = typeFail
			if endRev == 0 || !answers(cfg, op.Ep) {
				op.Type = typeInfo
			}
		}
		op.Ret = time.Now().UnixNano()
		rec.add(op)
	}
	finalPrefixRead(cfg, rec, prefix)
}

// startWatchers starts -watchers watchers on every member (watchLoop;
// their numbers follow the clients'), watching prefix from revision
// start. last holds the revision of the last event each saw; stop ends
// them and waits for them.
func startWatchers(cfg *config, rec *recorder, prefix string, start int64) (last []int64, stop func()) {
	n := len(cfg.endpoints) * cfg.watchers
	last = make([]int64, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			watchLoop(ctx, cfg, rec, cfg.clients+i, cfg.endpoints[i%len(cfg.endpoints)], prefix, start, &last[i])
		}(i)
	}
	return last, func() {
		cancel()
		wg.Wait()
	}
}

// finalPrefixRead reads every key under prefix after the run (see
// finalRead), as the op's reads.
func finalPrefixRead(cfg *config, rec *recorder, prefix string) {
	finalRead(cfg, rec, func(ctx context.Context, cli *clientv3.Client, op *Op) error {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err == nil {
			op.Rev = resp.Header.Revision
			for _, kv := range resp.Kvs {
				op.Reads = append(op.Reads, KV{Key: string(kv.Key), Value: string(kv.Value), Found: true, Mod: kv.ModRevision})
			}
		}
		return err
	})
}

// startRevision is the cluster's revision before the run, from the first
// member that answers.
func startRevision(cfg *config) (int64, error) {
	var rev int64
	err := finalOp(cfg, nil, "read", func(ctx context.Context, cli *clientv3.Client, op *Op) error {
		resp, err := cli.Get(ctx, "\x00")
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	return rev, err
}

// answers reports whether the member at ep answers a linearizable read.
func answers(cfg *config, ep string) bool {
	cli, err := dial(ep)
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	_, err = cli.Get(ctx, "\x00")
	return err == nil
}

// watchLoop is watcher id on member ep: it watches prefix from start
// until ctx ends, opening the watch again whenever it ends, and keeps
// the revision of the last event it saw in *last.
func watchLoop(ctx context.Context, cfg *config, rec *recorder, id int, ep, prefix string, start int64, last *int64) {
	cli, err := dial(ep)
	if err != nil {
		logf("watcher %d: %v", id, err)
		return
	}
	defer cli.Close()
	next := start
	for ctx.Err() == nil {
		now := time.Now().UnixNano()
		rec.add(Op{Proc: id, Client: id, Ep: ep, F: "watch-open", Call: now, Ret: now, Type: typeOK, StartRev: next})
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithPrevKV()) {
			now := time.Now().UnixNano()
			op := Op{Proc: id, Client: id, Ep: ep, Call: now, Ret: now, Rev: resp.Header.Revision}
			if resp.Canceled || resp.CompactRevision != 0 || resp.Err() != nil {
				op.F, op.Type, op.CompactRev = "watch-cancel", typeFail, resp.CompactRevision
				if err := resp.Err(); err != nil {
					_, op.Err = outcome(err)
				}
				rec.add(op)
				if resp.CompactRevision > next {
					next = resp.CompactRevision
				}
				break
			}
			if len(resp.Events) == 0 {
				continue
			}
			op.F, op.Type = "watch", typeOK
			for _, ev := range resp.Events {
				e := Event{Type: "put", Key: string(ev.Kv.Key), Value: string(ev.Kv.Value), Mod: ev.Kv.ModRevision}
				if ev.Type == mvccpb.DELETE {
					e.Type = "delete"
				}
				if ev.PrevKv != nil {
					e.PrevVal, e.PrevMod = string(ev.PrevKv.Value), ev.PrevKv.ModRevision
				}
				op.Events = append(op.Events, e)
			}
			rec.add(op)
			next = op.Events[len(op.Events)-1].Mod + 1
			atomic.StoreInt64(last, next-1)
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
