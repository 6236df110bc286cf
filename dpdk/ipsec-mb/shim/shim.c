/* Out-of-line copies of intel-ipsec-mb's GCM macros (IMB_AES128_GCM_PRE,
 * IMB_AES128_GCM_ENC, ...), which call through function pointers in the
 * IMB_MGR that init_mb_mgr_auto fills in for this CPU. Rust calls these
 * plain functions instead of mirroring the IMB_MGR layout. */
#include <stdint.h>
#include <stddef.h>
#include <intel-ipsec-mb.h>

/* The Rust side reserves this many bytes (64-aligned) per expanded key. */
#define ESPGW_IMB_GCM_KEY_BYTES 1024
_Static_assert(sizeof(struct gcm_key_data) <= ESPGW_IMB_GCM_KEY_BYTES,
               "struct gcm_key_data grew: raise GCM_KEY_BYTES in src/lib.rs");

size_t espgw_imb_gcm_key_bytes(void) { return sizeof(struct gcm_key_data); }

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

        if (aes256)
                IMB_AES256_GCM_ENC(m, kd, &ctx, buf, buf, len, iv, aad, aad_len,
                                   tag, 16);
        else
                IMB_AES128_GCM_ENC(m, kd, &ctx, buf, buf, len, iv, aad, aad_len,
                                   tag, 16);
}

void espgw_imb_gcm_dec(IMB_MGR *m, int aes256, const struct gcm_key_data *kd,
                       uint8_t *buf, uint64_t len, const uint8_t *iv,
                       const uint8_t *aad, uint64_t aad_len, uint8_t *tag)
{
        struct gcm_context_data ctx;

        if (aes256)
                IMB_AES256_GCM_DEC(m, kd, &ctx, buf, buf, len, iv, aad, aad_len,
                                   tag, 16);
        else
                IMB_AES128_GCM_DEC(m, kd, &ctx, buf, buf, len, iv, aad, aad_len,
                                   tag, 16);
}
