/* C wrappers for libfabric's static inline calls (they dispatch through the objects' operation
 * tables, so they exist in no library): each `nm_X` calls `fi_X` with the same arguments. */
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

int nm_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context) {
	return fi_domain(fabric, info, domain, context);
}
int nm_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context) {
	return fi_endpoint(domain, info, ep, context);
}
int nm_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context) {
	return fi_cq_open(domain, attr, cq, context);
}
int nm_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context) {
	return fi_av_open(domain, attr, av, context);
}
int nm_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags) {
	return fi_ep_bind(ep, bfid, flags);
}
int nm_enable(struct fid_ep *ep) {
	return fi_enable(ep);
}
int nm_close(struct fid *fid) {
	return fi_close(fid);
}
int nm_getname(struct fid *fid, void *addr, size_t *addrlen) {
	return fi_getname(fid, addr, addrlen);
}
int nm_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		 void *context) {
	return fi_av_insert(av, addr, count, fi_addr, flags, context);
}
ssize_t nm_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, uint64_t tag,
		 void *context) {
	return fi_tsend(ep, buf, len, desc, dest_addr, tag, context);
}
ssize_t nm_tinject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr, uint64_t tag) {
	return fi_tinject(ep, buf, len, dest_addr, tag);
}
ssize_t nm_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t tag,
		 uint64_t ignore, void *context) {
	return fi_trecv(ep, buf, len, desc, src_addr, tag, ignore, context);
}
ssize_t nm_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t addr,
		uint64_t key, void *context) {
	return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}
ssize_t nm_cancel(struct fid *fid, void *context) {
	return fi_cancel(fid, context);
}
ssize_t nm_cq_read(struct fid_cq *cq, void *buf, size_t count) {
	return fi_cq_read(cq, buf, count);
}
ssize_t nm_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags) {
	return fi_cq_readerr(cq, buf, flags);
}
const char *nm_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf, size_t len) {
	return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}
int nm_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access, uint64_t offset,
	      uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context) {
	return fi_mr_reg(domain, buf, len, access, offset, requested_key, flags, mr, context);
}
int nm_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags) {
	return fi_mr_bind(mr, bfid, flags);
}
int nm_mr_enable(struct fid_mr *mr) {
	return fi_mr_enable(mr);
}
void *nm_mr_desc(struct fid_mr *mr) {
	return fi_mr_desc(mr);
}
uint64_t nm_mr_key(struct fid_mr *mr) {
	return fi_mr_key(mr);
}

/* One-sided operations (`ofi/rma.rs`). An endpoint without RMA or atomics may have no operation
 * table for them: -FI_ENOSYS then, never a call through a null pointer. `flags` are the
 * completion semantics asked (FI_DELIVERY_COMPLETE where the provider has it, else 0); every
 * operation asks for a completion. */
ssize_t nm_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr, uint64_t addr,
		 uint64_t key, void *context, uint64_t flags) {
	if (!ep->rma)
		return -FI_ENOSYS;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct fi_rma_iov rma = {.addr = addr, .len = len, .key = key};
	struct fi_msg_rma msg = {.msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = dest_addr,
				 .rma_iov = &rma, .rma_iov_count = 1, .context = context, .data = 0};
	return fi_writemsg(ep, &msg, flags | FI_COMPLETION);
}
ssize_t nm_rma_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr, uint64_t addr,
		    uint64_t key, void *context) {
	if (!ep->rma)
		return -FI_ENOSYS;
	return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}
ssize_t nm_atomic(struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
		  int datatype, int op, void *context, uint64_t flags) {
	if (!ep->atomic)
		return -FI_ENOSYS;
	void *desc = NULL;
	struct fi_ioc ioc = {.addr = (void *)buf, .count = count};
	struct fi_rma_ioc rma = {.addr = addr, .count = count, .key = key};
	struct fi_msg_atomic msg = {.msg_iov = &ioc, .desc = &desc, .iov_count = 1, .addr = dest_addr,
				    .rma_iov = &rma, .rma_iov_count = 1, .datatype = (enum fi_datatype)datatype,
				    .op = (enum fi_op)op, .context = context, .data = 0};
	return fi_atomicmsg(ep, &msg, flags | FI_COMPLETION);
}
ssize_t nm_fetch_atomic(struct fid_ep *ep, const void *buf, size_t count, void *result, fi_addr_t dest_addr,
			uint64_t addr, uint64_t key, int datatype, int op, void *context) {
	if (!ep->atomic)
		return -FI_ENOSYS;
	return fi_fetch_atomic(ep, buf, count, NULL, result, NULL, dest_addr, addr, key, (enum fi_datatype)datatype,
			       (enum fi_op)op, context);
}
ssize_t nm_compare_atomic(struct fid_ep *ep, const void *buf, size_t count, const void *compare, void *result,
			  fi_addr_t dest_addr, uint64_t addr, uint64_t key, int datatype, int op, void *context) {
	if (!ep->atomic)
		return -FI_ENOSYS;
	return fi_compare_atomic(ep, buf, count, NULL, compare, NULL, result, NULL, dest_addr, addr, key,
				 (enum fi_datatype)datatype, (enum fi_op)op, context);
}
/* `kind`: 0 fi_atomicvalid, 1 fi_fetch_atomicvalid, 2 fi_compare_atomicvalid. */
int nm_atomicvalid(struct fid_ep *ep, int kind, int datatype, int op, size_t *count) {
	if (!ep->atomic)
		return -FI_ENOSYS;
	enum fi_datatype dt = (enum fi_datatype)datatype;
	enum fi_op o = (enum fi_op)op;
	if (kind == 0)
		return fi_atomicvalid(ep, dt, o, count);
	if (kind == 1)
		return fi_fetch_atomicvalid(ep, dt, o, count);
	return fi_compare_atomicvalid(ep, dt, o, count);
}
