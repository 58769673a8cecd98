/*
 * The member region: one file in the runtime dir that every process of a
 * member maps MAP_SHARED. It holds the rings between the processes, the
 * gatewayd slots, the reader table, the status records, the broadcast
 * event ring and the client port's TLS session ticket key. Everything
 * inside is addressed by offsets from the start of the region, so each
 * process may map it at a different address.
 *
 * A versioned header at offset 0 describes the layout. A process built for
 * another layout version refuses to attach and says so.
 */
#ifndef CETCD_SHM_REGION_H
#define CETCD_SHM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version of the layout this build reads and writes. Any change to the
 * header, or to a structure inside the region, bumps it. */
#define SHM_LAYOUT_VERSION 16

/* Bytes of the member's TLS session ticket key (shm_region_ticket_key). */
#define SHM_TICKET_KEY_BYTES 80u

/* Bytes a record may carry beyond --max-request-bytes (request identity,
 * framing of the message inside the record). */
#define SHM_RECORD_OVERHEAD 4096u

/* Largest --max-request-bytes a region accepts (rings hold several of the
 * largest record, so this bounds the region's size). */
#define SHM_MAX_REQUEST_BYTES_LIMIT (256u * 1024 * 1024)

struct shm_region_params {
	uint32_t slot_count;        /* gatewayd slots, at least 4 */
	uint64_t max_request_bytes; /* --max-request-bytes; ring sizes follow it */
	uint64_t member_id;         /* may be 0 until the member id is known */
	uint64_t cache_bytes;       /* stored's latest-entry cache's sets (0:
				     * none), at most SHM_MAX_CACHE_BYTES; its
				     * area is a page larger, for its header */
};

/* Largest latest-entry cache a region holds, and --latest-cache-mib's
 * default (131,072 sets of 15 ways: holds a million keys with 0.1% turned
 * away; about 8 MiB more for each further 500,000 keys). */
#define SHM_MAX_CACHE_BYTES (16ull << 30)
#define SHM_CACHE_MIB_DEFAULT 16

/*
 * Process-local handle. Ring, status and reader-entry calls on what a
 * thread owns may run in parallel; claims and releases (roles, slots,
 * reader entries) and detach must not run concurrently on one handle.
 * After fork(), a child must attach its own handle: OFD locks belong to
 * the open file description, which a forked child shares with its parent.
 */
struct shm_region;
struct ring;
struct bcast;

/*
 * Creates the region file at path, or re-initialises an existing one whose
 * launcher is dead (a stale region left by a SIGKILL). For daemons that
 * start on their own (systemd units, after 'cetcd --prepare-only'); the
 * file stays until removed, as the units' RuntimeDirectory= does. A new
 * file is built beside path and renamed over it, so a process still
 * mapping the old one keeps a consistent (if dead) view and never faults. Slot generations of
 * the old region carry over, so they keep increasing; a new file starts
 * them from a random floor (see shm_region_create_unnamed).
 *
 * The caller then holds the region's launcher lock until shm_region_detach.
 * *out is owned by the caller and freed by shm_region_detach.
 *
 * Returns 0, or:
 *   -EINVAL  bad parameters (errmsg_get(rc) says which)
 *   -EBUSY   a live launcher holds the region, or a live process still holds
 *            a role, slot or reader lock in the stale region
 *   -EEXIST  path exists and is not a cetcd region (it is left alone)
 *   -ENOSPC  the runtime dir has no room for the region
 *   -ENOMEM, or another -errno from open/mmap/rename/getrandom.
 */
int shm_region_create(const char *path, const struct shm_region_params *p,
		      struct shm_region **out);

/*
 * Creates a region that has no name: a file in dir (on the tmpfs the
 * runtime dir is on) made with O_TMPFILE, so that the kernel frees its
 * memory as soon as no process maps it or holds a descriptor of it,
 * however they died. Nothing of it is left in dir at any moment. The
 * launcher's children reach it through a descriptor they inherit
 * (shm_region_fd, shm_region_attach_fd). Slot generations start from a
 * random floor, so they never meet those of an earlier region of the
 * member (whose proposals a restart may replay).
 *
 * The caller holds the region's launcher lock until shm_region_detach.
 * Returns 0, or:
 *   -EINVAL  bad parameters (errmsg_get(rc) says which)
 *   -ENOSPC  the runtime dir has no room for the region
 *   -ENOMEM, or another -errno from open/mmap/getrandom.
 */
int shm_region_create_unnamed(const char *dir, const struct shm_region_params *p,
			      struct shm_region **out);

/* The descriptor of the region's file, for a child to inherit. Owned by
 * the handle: closed by shm_region_detach. */
int shm_region_fd(const struct shm_region *r);

/*
 * Attaches to the region open at descriptor fd (inherited from the
 * launcher). The file is reopened through /proc/self/fd, so that this
 * handle's OFD locks are its own and not shared with the launcher's; fd is
 * closed on success. *out is freed by shm_region_detach.
 * Returns 0, or:
 *   -EBADF   fd is not open
 *   -EPROTO  the file is not a region of this layout version
 *   -ENOENT  /proc is not mounted, or another -errno from open/mmap.
 */
int shm_region_attach_fd(int fd, struct shm_region **out);

/*
 * Attaches to an existing region. *out is freed by shm_region_detach.
 * Returns 0, or:
 *   -ENOENT  no region at path
 *   -EPROTO  the file is not a region of this layout version (bad magic,
 *            other layout version, inconsistent header); the message says
 *            which
 *   -EAGAIN  the file is empty: a launcher is creating it; retry
 *   -ENOMEM, or another -errno from open/mmap.
 */
int shm_region_attach(const char *path, struct shm_region **out);

/* Unmaps the region and drops every lock this handle holds (launcher,
 * roles, slots, reader entries). NULL is allowed. */
void shm_region_detach(struct shm_region *r);

/* The region's member id (0 until set) and a way to set it once known. */
uint64_t shm_region_member_id(const struct shm_region *r);
void shm_region_set_member_id(struct shm_region *r, uint64_t member_id);

/* The member and cluster ids raftd resolved (from its WAL, the flags or
 * the cluster it joined), published together: the cluster id is stored
 * first and the member id last (release), so a reader that sees a member
 * id (acquire) sees the cluster id that goes with it. shm_region_ids
 * returns false while none is published. */
void shm_region_set_ids(struct shm_region *r, uint64_t member_id, uint64_t cluster_id);
bool shm_region_ids(const struct shm_region *r, uint64_t *member_id, uint64_t *cluster_id);

/* Whether the member published itself to the cluster and stored applied
 * it (etcd's ReadyNotify): raftd sets it, the launcher tells systemd. */
void shm_region_set_published(struct shm_region *r);
bool shm_region_published(const struct shm_region *r);

/* Bumped every time the region file is created or re-initialised. */
uint64_t shm_region_incarnation(const struct shm_region *r);

/*
 * The member's TLS session ticket key: SHM_TICKET_KEY_BYTES drawn from the
 * kernel's random source when the region was made. Every gatewayd
 * encrypts and decrypts the client port's session tickets with it
 * (tls_ctx_set_ticket_key), so a client resumes its session on whichever
 * gatewayd its next connection lands.
 * Rotation: none; the key lives as long as the region. Go's server
 * rotates its own key daily and accepts a week of old ones; OpenSSL's
 * per-context key, which each gatewayd had before, lives as long as its
 * process, and the region goes with the member's last process (docs/
 * design.md, "The TLS session ticket key"). Valid until
 * shm_region_detach.
 */
const uint8_t *shm_region_ticket_key(const struct shm_region *r);

/* --max-request-bytes the region was sized for. */
uint64_t shm_region_max_request_bytes(const struct shm_region *r);

/* Largest payload any SPSC ring of this region accepts
 * (max_request_bytes + SHM_RECORD_OVERHEAD). */
uint32_t shm_region_max_record(const struct shm_region *r);

/* Size of the mapping, in bytes. */
size_t shm_region_bytes(const struct shm_region *r);

/*
 * The member's event feed (stored -> every gatewayd; valid while the region
 * is attached), a broadcast ring whose
 * records may be up to 2 * max_request_bytes + SHM_RECORD_OVERHEAD (an event
 * with its prev_kv). The producer publishes with bcast_publish and then
 * calls shm_events_notify once per batch to wake sleeping gateways that
 * asked for events (shm_doorbell_want_events).
 */
struct bcast *shm_events(struct shm_region *r);
void shm_events_notify(struct shm_region *r);

/*
 * The block set aside for stored's latest-entry cache (stored/mvcc/lcache.h),
 * zeroed when the region is made; NULL and 0 when it has none. stored
 * lays it out and writes it; gatewayds read it.
 */
void *shm_cache_area(struct shm_region *r, size_t *bytes);

/*
 * Allocation hook for the process-local handle (the only heap memory the
 * shm layer uses), so tests can count allocations and fail the Nth one.
 * NULL restores malloc/free.
 */
void shm_region_set_allocator(void *(*alloc_fn)(size_t),
			      void (*free_fn)(void *));

#endif
