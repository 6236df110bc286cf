/* See shim.h: each function forwards to the DPDK static-inline of the same name. */
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_pause.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_ethdev.h>
#include <rte_dev.h>
#include <rte_devargs.h>

#include "shim.h"

uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id,
                               struct rte_mbuf **rx_pkts, uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id,
                               struct rte_mbuf **tx_pkts, uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs,
                                unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void shim_rte_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

void shim_rte_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count)
{
	rte_pktmbuf_free_bulk(mbufs, count);
}

unsigned int shim_rte_ring_enqueue_burst(struct rte_ring *r, void *const *obj_table,
                                         unsigned int n, unsigned int *free_space)
{
	return rte_ring_enqueue_burst(r, obj_table, n, free_space);
}

unsigned int shim_rte_ring_dequeue_burst(struct rte_ring *r, void **obj_table,
                                         unsigned int n, unsigned int *available)
{
	return rte_ring_dequeue_burst(r, obj_table, n, available);
}

unsigned int shim_rte_ring_count(const struct rte_ring *r)
{
	return rte_ring_count(r);
}

unsigned int shim_rte_lcore_id(void)
{
	return rte_lcore_id();
}

uint64_t shim_rte_rdtsc(void)
{
	return rte_rdtsc();
}

void shim_rte_pause(void)
{
	rte_pause();
}

int shim_rte_errno(void)
{
	return rte_errno;
}

const char *shim_rte_dev_args(const struct rte_device *dev, const char **name)
{
	const struct rte_devargs *da = rte_dev_devargs(dev);

	if (da == NULL)
		return NULL;
	*name = da->name;
	return da->args;
}
