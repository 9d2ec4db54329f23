#ifndef MIRROR_COPENSSL_SHIM_H
#define MIRROR_COPENSSL_SHIM_H
/* The low-level SHA-256/512 functions are deprecated in OpenSSL 3.0 in favour of EVP, but they
   are the only way to copy a digest's intermediate state (SHA256_CTX is a plain struct; an
   EVP_MD_CTX cannot be exported). mirror journals that state with each durable checkpoint, so a
   resumed download does not re-read what it already hashed. They run the same assembly as EVP. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
/* Ed25519 keys in PEM files for signed manifests (PEM_read_bio_PrivateKey, PEM_read_bio_PUBKEY). */
#include <openssl/pem.h>
#endif
