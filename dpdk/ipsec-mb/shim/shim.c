/* Out-of-line copies of intel-ipsec-mb's GCM macros (IMB_AES128_GCM_PRE,
 * IMB_AES128_GCM_ENC, ...), which call through function pointers in the
 * IMB_MGR that init_mb_mgr_auto fills in for this CPU. Rust calls these
 * plain functions instead of mirroring the IMB_MGR layout. */
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <emmintrin.h>
#include <intel-ipsec-mb.h>

/* The Rust side reserves this many bytes (64-aligned) per expanded key. */
#define ESPGW_IMB_GCM_KEY_BYTES 1024
_Static_assert(sizeof(struct gcm_key_data) <= ESPGW_IMB_GCM_KEY_BYTES,
               "struct gcm_key_data grew: raise GCM_KEY_BYTES in src/lib.rs");

size_t espgw_imb_gcm_key_bytes(void) { return sizeof(struct gcm_key_data); }

/* The 12-byte nonce copied into `out` with one 16-byte store (bytes 12-15
 * zero), read as three 4-byte words.
 *
 * Why: the caller has just written the nonce on its stack (ESP: the 4-byte
 * salt, then the 8-byte IV), and the library reads it with one load of 12
 * or 16 bytes. A load that spans two stores cannot take its bytes from the
 * store buffer and waits until both reach the cache: measured at 16-18 ns
 * per 64-byte seal on Zen 5 and 11 ns (13 %) per 1420-byte one
 * (docs/crypto.md, "A freshly built nonce"). A 4-byte word lies inside
 * one store for any writer that stores 4 bytes or more at a time on 4-byte
 * boundaries, and the library's load then lies inside this one store.
 * SSE2 only (every x86-64 CPU). */
static inline void espgw_stage_iv(const uint8_t *iv, uint8_t out[16])
{
        uint32_t w0, w1, w2;

        memcpy(&w0, iv, 4);
        memcpy(&w1, iv + 4, 4);
        memcpy(&w2, iv + 8, 4);
        __m128i v = _mm_unpacklo_epi64(
                _mm_unpacklo_epi32(_mm_cvtsi32_si128((int)w0),
                                   _mm_cvtsi32_si128((int)w1)),
                _mm_cvtsi32_si128((int)w2));
        _mm_storeu_si128((__m128i *)out, v);
}

/* A manager for the direct API, or NULL. `arch` gets the IMB_ARCH chosen,
 * `features` the CPU features the library detected (IMB_FEATURE_*). */
IMB_MGR *espgw_imb_new_mgr(int *arch, uint64_t *features)
{
        IMB_ARCH a = IMB_ARCH_NONE;
        IMB_MGR *m = alloc_mb_mgr(0);

        if (m == NULL)
                return NULL;
        init_mb_mgr_auto(m, &a);
        if (imb_get_errno(m) != 0 || a == IMB_ARCH_NONE) {
                free_mb_mgr(m);
                return NULL;
        }
        *arch = (int)a;
        *features = m->features;
        return m;
}

void espgw_imb_gcm_pre(IMB_MGR *m, int aes256, const uint8_t *key,
                       struct gcm_key_data *kd)
{
        if (aes256)
                IMB_AES256_GCM_PRE(m, key, kd);
        else
                IMB_AES128_GCM_PRE(m, key, kd);
}

void espgw_imb_gcm_enc(IMB_MGR *m, int aes256, const struct gcm_key_data *kd,
                       uint8_t *buf, uint64_t len, const uint8_t *iv,
                       const uint8_t *aad, uint64_t aad_len, uint8_t *tag)
{
        struct gcm_context_data ctx;
        uint8_t iv16[16];

        espgw_stage_iv(iv, iv16);
        if (aes256)
                IMB_AES256_GCM_ENC(m, kd, &ctx, buf, buf, len, iv16, aad,
                                   aad_len, tag, 16);
        else
                IMB_AES128_GCM_ENC(m, kd, &ctx, buf, buf, len, iv16, aad,
                                   aad_len, tag, 16);
}

void espgw_imb_gcm_dec(IMB_MGR *m, int aes256, const struct gcm_key_data *kd,
                       uint8_t *buf, uint64_t len, const uint8_t *iv,
                       const uint8_t *aad, uint64_t aad_len, uint8_t *tag)
{
        struct gcm_context_data ctx;
        uint8_t iv16[16];

        espgw_stage_iv(iv, iv16);
        if (aes256)
                IMB_AES256_GCM_DEC(m, kd, &ctx, buf, buf, len, iv16, aad,
                                   aad_len, tag, 16);
        else
                IMB_AES128_GCM_DEC(m, kd, &ctx, buf, buf, len, iv16, aad,
                                   aad_len, tag, 16);
}

/* ChaCha20-Poly1305 (RFC 8439 AEAD, 96-bit nonce, 16-byte tag) as one job
 * through the job manager: in 1.3 its AVX-512 code is reached this way,
 * while the direct INIT/UPDATE/FINALIZE API is much slower per call (both
 * measured: docs/crypto.md). A job manager has state, so each thread uses
 * its own (`m`). The job completes on submit; the flush is a safety net.
 * `encrypt` 1 seals, 0 decrypts; either way `tag` gets the tag computed over
 * `aad` and the ciphertext (the caller compares on decrypt). Returns 0, or
 * -1 if the library refused the job. */
int espgw_imb_chacha_poly(IMB_MGR *m, int encrypt, const uint8_t *key,
                          uint8_t *buf, uint64_t len, const uint8_t *iv,
                          const uint8_t *aad, uint64_t aad_len, uint8_t *tag)
{
        IMB_JOB *job = IMB_GET_NEXT_JOB(m);
        uint8_t iv16[16];

        espgw_stage_iv(iv, iv16);

        job->cipher_mode = IMB_CIPHER_CHACHA20_POLY1305;
        job->hash_alg = IMB_AUTH_CHACHA20_POLY1305;
        job->cipher_direction = encrypt ? IMB_DIR_ENCRYPT : IMB_DIR_DECRYPT;
        job->chain_order =
                encrypt ? IMB_ORDER_CIPHER_HASH : IMB_ORDER_HASH_CIPHER;
        job->enc_keys = key;
        job->dec_keys = key;
        job->key_len_in_bytes = 32;
        job->iv = iv16;
        job->iv_len_in_bytes = 12;
        job->src = buf;
        job->dst = buf;
        job->cipher_start_src_offset_in_bytes = 0;
        job->msg_len_to_cipher_in_bytes = len;
        job->hash_start_src_offset_in_bytes = 0;
        job->msg_len_to_hash_in_bytes = len;
        job->u.CHACHA20_POLY1305.aad = aad;
        job->u.CHACHA20_POLY1305.aad_len_in_bytes = aad_len;
        job->auth_tag_output = tag;
        job->auth_tag_output_len_in_bytes = 16;
        job = IMB_SUBMIT_JOB(m);
        if (job == NULL)
                job = IMB_FLUSH_JOB(m);
        if (job == NULL || job->status != IMB_STATUS_COMPLETED)
                return -1;
        return 0;
}

/* A job manager for one thread (see espgw_imb_chacha_poly), or NULL. */
IMB_MGR *espgw_imb_new_job_mgr(void)
{
        IMB_ARCH a = IMB_ARCH_NONE;
        IMB_MGR *m = alloc_mb_mgr(0);

        if (m == NULL)
                return NULL;
        init_mb_mgr_auto(m, &a);
        if (imb_get_errno(m) != 0 || a == IMB_ARCH_NONE) {
                free_mb_mgr(m);
                return NULL;
        }
        return m;
}

void espgw_imb_free_mgr(IMB_MGR *m) { free_mb_mgr(m); }
