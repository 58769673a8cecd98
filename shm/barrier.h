/*
 * Memory-ordering vocabulary of the shm layer.
 *
 * Everything here is C11 <stdatomic.h>. The orderings relied on:
 *
 *  - release store / acquire load: every write the producer made before a
 *    release store of a cursor is visible to a consumer whose acquire load
 *    reads that value (or a later one). Used to publish ring records:
 *    write the record, then store the cursor with release.
 *  - full fence (atomic_thread_fence(memory_order_seq_cst)): orders earlier
 *    stores before later loads, which acquire/release does not. Needed where
 *    two processes each store a flag and then load the other's (Dekker):
 *    doorbells ("sleeping" vs. the ring cursor) and the reader table (txid
 *    vs. the published record). With a full fence on both sides, at least
 *    one side sees the other's store.
 *  - release fence / acquire fence (seqlocks): a writer stores its "write in
 *    progress" mark, release fence, then the data; a reader copies the data,
 *    acquire fence, then re-reads the mark. This is Linux's smp_wmb/smp_rmb
 *    pattern (write_seqcount_begin, read_seqcount_retry); on x86 both fences
 *    only stop the compiler, which is all TSO needs.
 */
#ifndef CETCD_SHM_BARRIER_H
#define CETCD_SHM_BARRIER_H

#include <stdatomic.h>

static inline void shm_full_fence(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

/* Tells the CPU we are spinning (frees the core's other hyperthread). */
static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

#endif
