package main

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/clientv3"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
)

// runTxn is the txn workload: each client picks one to three of the keys,
// reads them in one Txn of Ranges (a snapshot, recorded as a read), then
// writes new values to all of them in a Txn whose compares hold only if
// none was modified since (mod revision of each as read); when one was,
// the else branch reads them again. After the run all keys are read once
// more in one snapshot.
func runTxn(ctx context.Context, cfg *config, rec *recorder) {
	keys := workloadKeys(cfg, "t")
	runWorkers(ctx, cfg, rec, func(ctx context.Context, w *worker) { txnClient(ctx, w, keys) })
	finalRead(cfg, rec, func(ctx context.Context, cli *clientv3.Client, op *Op) error {
		resp, err := cli.Txn(ctx).Then(snapshotOps(keys)...).Commit()
		if err == nil {
			op.Rev = resp.Header.Revision
			op.Reads = snapshotKVs(keys, resp.Responses)
		}
		return err
	})
}

// snapshotOps are the Ranges of a read of keys in one Txn.
func snapshotOps(keys []string) []clientv3.Op {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k)
	}
	return ops
}

// snapshotKVs is what the Ranges of a Txn found, key by key.
func snapshotKVs(keys []string, resps []*pb.ResponseOp) []KV {
	out := make([]KV, len(keys))
	for i, k := range keys {
		out[i].Key = k
		if i >= len(resps) {
			continue
		}
		if rr := resps[i].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			out[i].Value, out[i].Found, out[i].Mod = string(rr.Kvs[0].Value), true, rr.Kvs[0].ModRevision
		}
	}
	return out
}

func txnClient(ctx context.Context, w *worker, keys []string) {
	for seq := 0; ctx.Err() == nil; seq++ {
		n := 1 + w.rng.Intn(3)
		if n > len(keys) {
			n = len(keys)
		}
		var mine []string
		for _, i := range w.rng.Perm(len(keys))[:n] {
			mine = append(mine, keys[i])
		}
		read := Op{F: "read"}
		err := w.do(&read, func(ctx context.Context) error {
			resp, err := w.cli.Txn(ctx).Then(snapshotOps(mine)...).Commit()
			if err == nil {
				read.Rev = resp.Header.Revision
				read.Reads = snapshotKVs(mine, resp.Responses)
			}
			return err
		})
		if err != nil {
			continue
		}
		op := Op{F: "txn", Reads: read.Reads}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		value := fmt.Sprintf("c%d-%d", w.id, seq)
		for _, kv := range read.Reads {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(kv.Key), "=", kv.Mod))
			puts = append(puts, clientv3.OpPut(kv.Key, value))
			op.Writes = append(op.Writes, KV{Key: kv.Key, Value: value, Found: true})
		}
		w.do(&op, func(ctx context.Context) error {
			resp, err := w.cli.Txn(ctx).If(cmps...).Then(puts...).Else(snapshotOps(mine)...).Commit()
			if err == nil {
				op.Rev = resp.Header.Revision
				op.Succeeded = resp.Succeeded
				if !resp.Succeeded {
					op.Else = snapshotKVs(mine, resp.Responses)
				}
			}
			return err
		})
	}
}
