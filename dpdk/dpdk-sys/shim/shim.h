/*
 * Out-of-line wrappers for DPDK's static-inline functions.
 *
 * Rust cannot call C static-inline functions, so each one the binding needs is
 * wrapped here once. Only per-burst (or rarer) calls belong here: per-packet
 * mbuf field arithmetic is done in Rust so that it inlines.
 */
#ifndef ESPGW_DPDK_SHIM_H
#define ESPGW_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;
struct rte_device;

uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
                               struct rte_mbuf **rx_pkts, uint16_t nb_pkts);
uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
                               struct rte_mbuf **tx_pkts, uint16_t nb_pkts);

struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp);
int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs,
                                unsigned int count);
void shim_rte_pktmbuf_free(struct rte_mbuf *m);
void shim_rte_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count);

unsigned int shim_rte_ring_enqueue_burst(struct rte_ring *r, void *const *obj_table,
                                         unsigned int n, unsigned int *free_space);
unsigned int shim_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table,
                                         unsigned int n, unsigned int *available);
unsigned int shim_rte_ring_count(const struct rte_ring *r);

unsigned int shim_rte_lcore_id(void);
uint64_t shim_rte_rdtsc(void);
void shim_rte_pause(void);
int shim_rte_errno(void);

/*
 * The driver arguments DPDK keeps for `dev` ("framesz=9216,..."), and the
 * device name they were given for in *name; NULL when it has none. Here, not
 * in Rust, because struct rte_devargs is not part of the binding: the C
 * compiler knows its layout.
 */
const char *shim_rte_dev_args(const struct rte_device *dev, const char **name);

#endif
