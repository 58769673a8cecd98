/*
 * Internal to config/: the flag table's row type, the table, and the
 * functions its files share. Other components use config.h.
 */
#ifndef CETCD_CONFIG_CONFIG_INT_H
#define CETCD_CONFIG_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "base/log/log.h"
enum config_type {
	CT_STRING,    /* char * */
	CT_CHOICE,    /* char *, one of f->choices */
	CT_BOOL,      /* bool */
	CT_UINT,      /* uint64_t (Go uint) */
	CT_UINT32,    /* uint32_t */
	CT_INT,       /* int64_t (Go int, int64) */
	CT_DURATION,  /* int64_t nanoseconds (Go time.Duration) */
	CT_URLS,      /* struct config_urls */
	CT_URLS_STAR, /* struct config_strings: "*" or URLs (--cors) */
	CT_USTRINGS,  /* struct config_strings, unique and sorted */
	CT_STRINGS,   /* struct config_strings, as given */
	CT_IGNORED,   /* no field: etcd accepts and ignores it, with a warning */
};

/* What cetcd does with a flag's value. This column is the one place that
 * knows what is built: flipping an entry to CS_ANY is how a feature is
 * switched on. */
enum config_support {
	CS_ANY,          /* every valid value works */
	CS_DEFAULT_ONLY, /* feature not built: only the default is accepted */
	CS_PARTIAL,      /* some values work; f->check refuses the others */
};

/* Programs that accept a flag. */
#define SCOPE_LAUNCHER (1u << CONFIG_PROG_LAUNCHER)
#define SCOPE_GATEWAYD (1u << CONFIG_PROG_GATEWAYD)
#define SCOPE_ALL                                                        \
	(SCOPE_LAUNCHER | (1u << CONFIG_PROG_RAFTD) | (1u << CONFIG_PROG_STORED) | \
	 SCOPE_GATEWAYD)

struct config_flag;
typedef int (*config_check_fn)(const struct cetcd_config *c, const struct config_flag *f,
			       struct config_error *err);

struct config_flag {
	const char *name;
	enum config_type type;
	size_t off;               /* of the field in struct cetcd_config */
	const char *def;          /* default, parsed like a command-line value */
	enum config_support support;
	unsigned scope;           /* SCOPE_* */
	bool no_env;              /* program-only flags have no ETCD_ variable */
	const char *section;      /* --help heading */
	const char *help_def;     /* default as --help shows it, if not def */
	const char *usage;
	const char *const *choices; /* CT_CHOICE; NULL-terminated */
	const char *same_as_def;  /* another spelling of the default's meaning */
	config_check_fn check;    /* CS_PARTIAL */
};

/* The table (flags.c), config_nflags rows. */
extern const struct config_flag config_flags[];
extern const size_t config_nflags;

/* Largest --gateways; the region has 2 * gateways + 2 slots. */
#define CONFIG_MAX_GATEWAYS 64u
/* --raft-log-mib: 1 TiB */
#define CONFIG_MAX_RAFT_LOG_MIB (1u << 20)
/* etcd's maxElectionMs. */
#define CONFIG_MAX_ELECTION_MS 50000u

/* Writes a message and the exit status it calls for into err (NULL: none). */
void config_errorf(struct config_error *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* config.c: a flag's field in c; defaults to compare against (freed with
 * config_defaults_free; NULL if out of memory); whether f's value is the
 * same in a and b; f's field set from text (-EINVAL with Go's reason in
 * why, or -ENOMEM). */
const void *config_cfield(const struct cetcd_config *c, const struct config_flag *f);
struct cetcd_config *config_defaults(void);
void config_defaults_free(struct cetcd_config *d);
bool config_equal(const struct cetcd_config *a, const struct cetcd_config *b,
		  const struct config_flag *f);
int config_set(struct cetcd_config *c, const struct config_flag *f, const char *text,
	       char *why, size_t whylen);

/* flags.c: whether f is one of cetcd's own flags (no etcd flag). */
bool config_flag_is_cetcds(const struct config_flag *f);

/* flags.c: refuses any value whose feature is not built, naming the flag
 * (0, or -ENOTSUP with the message in err). */
int config_check_supported(const struct cetcd_config *c, struct config_error *err);

/* file.c: etcd's YAML configuration file (at most CONFIG_FILE_MAX_BYTES)
 * into c, which holds defaults: each key sets its flag (source
 * CONFIG_FROM_FILE). name is the file's name in messages. Returns 0,
 * -EINVAL (bad YAML, unknown or repeated key, wrong type or value; err
 * names the line), -ENOMEM; config_file_load also the negative errno of
 * opening or reading the file, or -EFBIG. Exit status 1 in err. */
#define CONFIG_FILE_MAX_BYTES (1u << 20)
int config_file_parse(struct cetcd_config *c, const char *name, const void *buf, size_t len,
		      struct config_error *err);
int config_file_load(struct cetcd_config *c, const char *path, struct config_error *err);

/* values.c, Go's syntaxes. Lists: config_split cuts s at commas (every
 * piece kept, as strings.Split; unique sorts and drops repeats), 0 or
 * -ENOMEM. Numbers (strconv, base 0, '_' between digits): -EINVAL
 * (syntax) or -ERANGE. Durations (config_parse_duration in config.h) and URLs (etcd's
 * types.NewURLs): -EINVAL with Go's or etcd's message in why, or -ENOMEM.
 * config_parse_urls sorts and drops repeats. config_format_duration
 * writes whole units ("1h"), for messages. */
int config_split(const char *s, bool unique, struct config_strings *out);
void config_strings_free(struct config_strings *s);
int config_parse_uint_text(const char *s, uint64_t max, uint64_t *out);
int config_parse_int_text(const char *s, int64_t min, int64_t max, int64_t *out);
void config_format_duration(int64_t ns, char *buf, size_t len);
int config_parse_url(const char *in, struct config_url *u, char *why, size_t whylen);
int config_parse_urls(const char *s, struct config_urls *out, char *why, size_t whylen);
void config_urls_free(struct config_urls *us);
/* qsort order of struct config_url, by text */
int config_url_cmp(const void *a, const void *b);
/* a URL list comma-joined into buf */
void config_urls_text(const struct config_urls *us, char *buf, size_t len);

/* --discovery-srv (srv.c): the initial cluster from the SRV records
 * _etcd-server-ssl[-NAME]._tcp and _etcd-server[-NAME]._tcp of the
 * domain, as etcd 3.4's pkg/srv builds it, into c->initial_cluster; the
 * member must be among them (its advertised peer URLs resolve to a
 * record's target). 0, or -EINVAL/-ENOMEM with err set (exit 1). */
int config_srv_cluster(struct cetcd_config *c, struct config_error *err);

/* One SRV record: its target's name and its port. */
struct srv_rr {
	char target[1025];  /* NS_MAXDNAME */
	unsigned port;
};

/* The SRV records of a DNS answer (ans, n bytes), up to max, into out:
 * their count, or -1 with why set when the answer cannot be read.
 * Records that are not SRV, are cut short or name no readable target
 * are passed over. */
int config_srv_parse(const unsigned char *ans, int n, struct srv_rr *out, size_t max,
		     char *why, size_t wlen);

#endif
