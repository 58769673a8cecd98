/* Auto TLS: etcd's self-signed certificate (see tls_self_cert in tls.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/diskio/diskio.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls_int.h"

/* The SAN of one listen host: "host" or "host:port" (net.SplitHostPort's
 * host, brackets of an IPv6 address dropped). */
static GENERAL_NAME *tls_san_of(const char *hostport)
{
	char host[256];
	const char *end = hostport + strlen(hostport);
	const char *start = hostport;
	ASN1_OCTET_STRING *ip;
	GENERAL_NAME *g;

	if (*start == '[') {
		start++;
		end = strchr(start, ']') ? strchr(start, ']') : end;
	} else if (strchr(hostport, ':') && strchr(hostport, ':') == strrchr(hostport, ':')) {
		end = strchr(hostport, ':');
	}
	snprintf(host, sizeof(host), "%.*s", (int)(end - start), start);
	g = GENERAL_NAME_new();
	if (!g)
		return NULL;
	ip = a2i_IPADDRESS(host);
	if (ip) {
		GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
		return g;
	}
	ERR_clear_error();
	ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
	if (!dns || !ASN1_STRING_set(dns, host, (int)strlen(host))) {
		ASN1_IA5STRING_free(dns);
		GENERAL_NAME_free(g);
		return NULL;
	}
	GENERAL_NAME_set0_value(g, GEN_DNS, dns);
	return g;
}

static int tls_add_ext(X509 *x, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (!ext)
		return 0;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok;
}

/* The certificate of SelfCert for key, as etcd's template says. */
static X509 *tls_make_cert(EVP_PKEY *key, const char *const *hosts, size_t count)
{
	X509 *x = X509_new();
	BIGNUM *serial = BN_new();
	GENERAL_NAMES *sans = NULL;
	X509_NAME *name;
	bool ok = x && serial;

	/* a random serial below 2^128, as etcd's rand.Int */
	ok = ok && X509_set_version(x, X509_VERSION_3) &&
	     BN_rand(serial, 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
	     BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) &&
	     X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
	     X509_time_adj_ex(X509_getm_notAfter(x), TLS_SELF_CERT_VALIDITY_DAYS, 0, NULL);
	name = ok ? X509_get_subject_name(x) : NULL;
	ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
					      (const unsigned char *)"etcd", -1, -1, 0) &&
	     X509_set_issuer_name(x, name) && X509_set_pubkey(x, key) &&
	     tls_add_ext(x, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
	     tls_add_ext(x, NID_ext_key_usage, "serverAuth") &&
	     tls_add_ext(x, NID_basic_constraints, "critical,CA:FALSE");
	if (ok && count) {
		sans = GENERAL_NAMES_new();
		ok = sans != NULL;
		for (size_t i = 0; ok && i < count; i++) {
			GENERAL_NAME *g = tls_san_of(hosts[i]);
			ok = g && sk_GENERAL_NAME_push(sans, g);
			if (!ok)
				GENERAL_NAME_free(g);
		}
		ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, sans, 0, X509V3_ADD_DEFAULT);
	}
	/* Go signs with SHA-512 for a P-521 key */
	ok = ok && X509_sign(x, key, EVP_sha512());
	GENERAL_NAMES_free(sans);
	BN_free(serial);
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* Writes the PEM in bio to dir/name: aside, fsynced, renamed. */
static int tls_write_pem(int dirfd, const char *dir, const char *name, BIO *bio, mode_t mode)
{
	char tmp[64];
	char *data;
	long len = BIO_get_mem_data(bio, &data);
	int fd, rc;

	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = -errno;
		log_warn("cannot create the file", LOG_STR("path", dir), LOG_STR("file", name),
			 LOG_ERRNO(rc));
		return errmsg_set(rc, "tls: cannot write %s/%s: %s", dir, name, strerror(-rc));
	}
	rc = diskio_pwrite_all(fd, data, (size_t)len, 0);
	if (!rc)
		rc = diskio_fdatasync(fd);
	close(fd);
	if (!rc && renameat(dirfd, tmp, dirfd, name) != 0)
		rc = -errno;
	if (rc) {
		unlinkat(dirfd, tmp, 0);
		return errmsg_set(rc, "tls: cannot write %s/%s: %s", dir, name, strerror(-rc));
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	log_info(strcmp(name, "cert.pem") == 0 ? "created cert file" : "created key file",
		 LOG_STR("path", path));
	return 0;
}

/* Makes a new pair in dir (locked by the caller). */
static int tls_self_cert_make(int dirfd, const char *dir, const char *const *hosts,
			      size_t count)
{
	EVP_PKEY *key = EVP_EC_gen("P-521");
	X509 *cert = key ? tls_make_cert(key, hosts, count) : NULL;
	BIO *cert_pem = BIO_new(BIO_s_mem()), *key_pem = BIO_new(BIO_s_mem());
	int rc;

	/* the key as SEC1 "EC PRIVATE KEY", as Go's MarshalECPrivateKey */
	if (!cert || !cert_pem || !key_pem || PEM_write_bio_X509(cert_pem, cert) != 1 ||
	    PEM_write_bio_PrivateKey_traditional(key_pem, key, NULL, NULL, 0, NULL, NULL) != 1) {
		rc = tls_ssl_error(-EPROTO, "tls: cannot make a self-signed certificate in %s", dir);
		goto out;
	}
	rc = tls_write_pem(dirfd, dir, "cert.pem", cert_pem, 0666);
	if (!rc)
		rc = tls_write_pem(dirfd, dir, "key.pem", key_pem, 0600);
	if (!rc && fsync(dirfd) != 0)
		rc = errmsg_set(-errno, "tls: cannot fsync %s: %s", dir, strerror(errno));
out:
	BIO_free(cert_pem);
	BIO_free(key_pem);
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

static int tls_set_path(char **field, const char *dir, const char *name)
{
	size_t len = strlen(dir) + strlen(name) + 2;
	char *p = tls_zalloc(len);

	if (!p)
		return errmsg_set(-ENOMEM, "tls: out of memory");
	snprintf(p, len, "%s/%s", dir, name);
	tls_free_mem(*field);
	*field = p;
	return 0;
}

int tls_self_cert(const char *dir, const char *const *hosts, size_t host_count,
		  struct tls_info *out)
{
	struct stat st;
	int dirfd, rc;

	rc = diskio_mkdir_all(dir, 0700);
	if (rc) {
		log_warn("cannot create cert directory", LOG_STR("path", dir), LOG_ERRNO(rc));
		return errmsg_set(rc, "tls: cannot create the cert directory %s: %s", dir,
				  strerror(-rc));
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return errmsg_set(-errno, "tls: cannot open the cert directory %s: %s", dir,
				  strerror(errno));
	/* the daemons of a member may get here at once */
	if (flock(dirfd, LOCK_EX) != 0) {
		rc = errmsg_set(-errno, "tls: cannot lock %s: %s", dir, strerror(errno));
		goto out_close;
	}
	if (fstatat(dirfd, "cert.pem", &st, 0) != 0 || fstatat(dirfd, "key.pem", &st, 0) != 0) {
		rc = tls_self_cert_make(dirfd, dir, hosts, host_count);
		if (rc)
			goto out_close;
	}
	rc = tls_set_path(&out->cert_file, dir, "cert.pem");
	if (!rc)
		rc = tls_set_path(&out->key_file, dir, "key.pem");
	out->self_signed = rc == 0;
out_close:
	close(dirfd); /* drops the lock */
	return rc;
}
