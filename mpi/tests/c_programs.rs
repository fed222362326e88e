//! The C ABI end to end: the C programs in `tests/c/` are compiled with `bin/mpicc` (with
//! `-Wall -Wextra -Werror`) against the `libmpi.so` of this build and run under `nemesis-run`
//! (one also under MPICH's `mpiexec.hydra`). Each program checks its own results against values
//! computed locally and prints `OK <program> <rank>` per rank; a failed check ends the job with
//! MPI_Abort, so a wrong result fails the test.
//!
//! | test | program(s) | ranks |
//! |---|---|---|
//! | `pingpong` | `pingpong.c`: 0 B – 1 MiB both ways, Ssend, Sendrecv, probes, counts, PROC_NULL | 2, 3 |
//! | `fused_send_and_receive` | `fastpath.c`: the fused MPI_Send/MPI_Recv path's corner cases — order among fastbox-sized and longer messages and behind sends waiting for cells, an unexpected message of the same source queued first (of another source: taken past it), an earlier posted receive (ANY_SOURCE, or for another source), truncation, ANY_SOURCE/ANY_TAG, STATUS_IGNORE, longer than a slot — with fault tolerance off and on | 2, 3; 2 in 2 FT groups |
//! | `deferred_receives` | `deferred.c`: MPI_Irecv kept unposted until MPI_Waitall takes the message from the fastbox — Waitall in reverse order, a blocking Recv, an ANY_SOURCE Irecv and an Iprobe after a deferred receive, Ssend both ways (no deadlock), truncation, Cancel, Request_free, a window of 64 half arriving late, ANY_TAG, an Isend in the same Waitall, STATUSES_IGNORE — with deferral on and off (`NEMESIS_DEFER_RECV=0`), with fault tolerance on | 2, 3; 2 in each wait mode; 2 with deferral off; 2 in 2 FT groups |
//! | `one_sided_smoke` | `win_smoke.c`: every window flavour on one node (allocate, create by CMA, allocate_shared contiguous and not with load/store through shared_query, dynamic with attach/detach); Put/Get/Accumulate/Fetch_and_op/Compare_and_swap/Rput/Rget under fence, PSCW (wait and test), lock and lock_all; a strided target type; attributes, names, keyvals with delete callbacks; error classes; with fault tolerance a window across FT groups refused, one inside a group used | 1, 2, 3; 4 yielding; 2 in 2 FT groups |
//! | `p2p_modes` | `p2p_modes.c`: Ssend/Bsend/Rsend and non-blocking forms, attached buffer, Sendrecv_replace, persistent requests, Request_free, get_status, Waitsome/Testsome/Testany, PROC_NULL everywhere | 2, 3 |
//! | `cancel_and_matched_probes` | `cancel_mprobe.c`: MPI_Cancel of receives and of eager, rendezvous, synchronous, persistent sends (not matched: withdrawn; matched: not); Mprobe/Improbe/Mrecv/Imrecv, typed and large; MESSAGE_NO_PROC | 2, 3, 2 over 2 nodes |
//! | `thread_multiple` | `threads.c`: 4 threads per rank sending and receiving at once with ANY_SOURCE and their own tags (Send/Recv, Isend/Irecv, Sendrecv, Issend with Mprobe), collectives on their own communicators meanwhile, communicators created by all at once | 2, 3 |
//! | `datatypes` | `datatypes.c`: every constructor, bounds, envelopes/contents, names; non-contiguous data byte by byte in every transfer mode, Pack/Unpack, partial messages, pairs, MPI_BOTTOM | 2, 3; 2 with rings only; 2 over 2 nodes |
//! | `groups_and_communicators` | `groups.c`: every Group_* call, Comm_create (one group, disjoint groups), Comm_create_group (by the group only, tags), Comm_split_type(SHARED) along the nodes, Comm_compare, names; freed communicators freed (a pending receive completes, handles and contexts reused over 4200 dup/free rounds) | 1, 2 (4200 rounds), 3, 4, 7; 5 over 2 nodes |
//! | `intercommunicators` | `intercomm.c`: Intercomm_create from uneven and interleaved halves of WORLD (one group reversed), test_inter, sizes, local and remote groups rank by rank; p2p both ways with ANY_SOURCE/ANY_TAG, specific sources, PROC_NULL; Intercomm_merge with high false/true/equal rank by rank; dup (attribute copy, compare), two idups in flight, split and create on an intercommunicator; Barrier/Bcast/Reduce/Allreduce/Gather/Scatter/Allgather/Alltoall for every root at counts 1 and 3000, a strided type; the v-forms and Reduce_scatter(_block) with uneven counts and gaps; bad leader, bad root, intercommunicators where intracommunicators are required and the reverse; 1200 create/dup/merge/free rounds (more contexts than a process has) | 1–8; 5 over 2 nodes |
//! | `nonblocking_communicator_duplication` | `idup.c`: MPI_Comm_idup, four in flight on two communicators among an Ibarrier and an Iallreduce, overlapped with computation, a blocking dup meanwhile, completed by Waitall and in reverse; attributes copied at the call; the new communicators isolated from each other, used for p2p and collectives, compared, freed; an idup of an idup; 20 rounds | 1, 2, 3, 4, 7; 5 over 2 nodes |
//! | `predefined_reductions_on_every_type` | `op_predefined.c`: MAX…BXOR, MINLOC/MAXLOC on every predefined type MPI-4.1 §6.9.2 allows (integers, fixed-size, AINT/OFFSET/COUNT, float/double/long double, every complex, logicals, BYTE, the pairs) through Reduce/Allreduce/Reduce_local at counts 7 and 300; MPI_ERR_OP on pairs the standard leaves undefined; also built by MPICH's mpicc, on nemesis and on MPICH | 1, 2, 3, 4, 8; 5 over 2 nodes; 3 MPICH-built |
//! | `struct_types_with_no_data` | `type_empty.c`: structs of zero block lengths, of zero-size members, of no members, with MPI_LB/MPI_UB markers, a dropped zero-length member: size, bounds, true bounds, envelope/contents, Pack, messages in a ring and to oneself, Bcast; bad arguments; also built by MPICH's mpicc, on nemesis and on MPICH | 1, 2, 3, 4, 8; 5 over 2 nodes; 3 MPICH-built |
//! | `distributed_array_types` | `type_darray.c`: Type_create_darray (block, cyclic(k), none; default and explicit arguments; C and Fortran order; 1-3 dimensions) for every process of 1-6-process grids against a brute-force owner test, a global array assembled on rank 0 from every rank's part, envelope/contents, MPI_ERR_RANK/MPI_ERR_ARG; also MPICH-built, on nemesis and on MPICH | 1, 2, 3, 4, 6, 8; 5 over 2 nodes; 4 MPICH-built |
//! | `large_count_datatype_calls` | `type_large.c`: every `_c` constructor against its int form (layout, data around a ring, envelope_c/contents_c), types over 2^31 bytes, Pack_c/Unpack_c, Get_count_c/Get_elements_c, Reduce_local_c, Op_create_c (a callback calling MPI); also MPICH-built, on nemesis and on MPICH | 1, 2, 3, 8; 4 over 2 nodes; 3 MPICH-built |
//! | `external32_packing` | `type_external.c`: Pack_external(_size)/Unpack_external (+_c): sizes, big-endian bytes, long as 4 bytes, vectors, complex, between ranks, errors; also MPICH-built, on nemesis and on MPICH | 1, 2, 3, 8; 2 over 2 nodes; 2 MPICH-built |
//! | `type_free_while_in_use` | `type_free_in_use.c`: MPI_Type_free before completion of Isend/Irecv (1 KiB and 1 MiB, strided), Ibcast, Ialltoallw, and before MPI_Start of persistent Send_init/Recv_init (started 3 times), other types made meanwhile; a vector of a freed type (layout, contents, a message); MPI_Op_free of a user operation a pending Iallreduce uses | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `type_and_op_free_before_a_persistent_collective_starts` | `type_free_in_use.c` with `PERSISTENT_COLL=1`: also Bcast_init with a strided type and Allreduce_init with a user operation, both freed before MPI_Start, other ones made meanwhile (the recipes hold them) | 2, 3 |
//! | `removed_mpi1_datatype_calls` | `type_legacy.c`: MPI_Address, Type_extent/lb/ub, Type_struct with MPI_LB, Type_hvector/hindexed | 1, 2, 3, 8; 2 over 2 nodes |
//! | `types_by_parameters` | `type_named.c`: Type_create_f90_real/complex/integer (sizes, F90 envelopes and contents, a message, not freeable), Type_match_size, Type_get_value_index, bad arguments; also MPICH-built, on nemesis and on MPICH | 1, 2, 3, 8; 2 over 2 nodes; 2 MPICH-built |
//! | `callbacks_may_call_mpi` | `reentrant_attrs.c`, `reentrant_ops.c`: attribute copy/delete callbacks (communicators, datatypes; dup, idup, set, delete, free, a nested free), error handlers, user operations (Allreduce, Reduce, Reduce_local, Iallreduce with Wait and Test; one freeing its non-contiguous type) that call MPI; a callback's error code returned by MPI_Comm_dup; MPI_COMM_SELF's attributes deleted first at MPI_Finalize in LIFO order — at MPI_THREAD_SINGLE and MPI_THREAD_MULTIPLE (a second thread calling MPI meanwhile) | 1, 2, 4, 8 (SINGLE), 1, 2, 4 (MULTIPLE); 3 over 2 nodes at each level |
//! | `user_operations` | `user_ops.c`: MPI_Op_create/free/commutative; a non-commutative operation (affine maps on MPI_2INT) in rank order and a user sum matching MPI_SUM in Reduce (every root), Allreduce (in place too), Reduce_local; counts to 5000 | 1, 2, 3, 4, 5, 8; 3, 4, 6 with each algorithm forced; 5 over 2 nodes; 7 on 3 pretend nodes |
//! | `attributes_info_and_memory` | `attrs.c`: the predefined attributes (a message tagged MPI_TAG_UB), keyvals with copy/delete callbacks through dup, set, delete, free, freed keyvals, a refusing copy; MPI_Info_* and MPI_INFO_ENV; Alloc_mem/Free_mem; Pcontrol | 1, 2, 3 |
//! | `program_error_handlers` | `errhandlers.c`: Comm_create_errhandler (errors reach it, dups inherit it, freed while in use), Comm_call_errhandler, Add_error_class/code/string with Error_class/string and MPI_LASTUSEDCODE | 1, 2 |
//! | `topologies` | `topo.c`: Dims_create; a 2-D Cartesian grid (coords, ranks, periodic wrap, shifts with a halo exchange, Cart_sub rows and columns), a grid smaller than the job; a graph (neighbours, an exchange along the edges); Topo_test; dup keeps the topology | 1, 2, 3, 4, 6, 7 |
//! | `ring` | `ring.c`: blocking, non-blocking and Sendrecv rings; messages to oneself | 1, 2, 3, 5, 8 |
//! | `collectives_by_the_model` | `collectives.c`: every collective, 6 counts (past the eager limit), 3 roots, types, ops, in place (through the collective areas by default, then with `NEMESIS_COLL_AREA=0` by messages) | 1, 2, 3, 4, 5, 8; 2, 3, 4 without areas |
//! | `irregular_collectives` | `vcoll.c`: Gatherv/Scatterv at every root, Allgatherv, Alltoallv with counts varying by rank (zero too) and gaps between blocks, in place; a strided derived type on either side; Alltoallw with a type per peer; Reduce_scatter(_block), in place too; Scan/Exscan with MPI_SUM and a non-commutative user operation (rank order); MINLOC/MAXLOC on every C pair type; reductions on derived types; Bcast/Gather/Scatter/Allgather/Alltoall with a strided type on some ranks and ints on others, in place, a struct type; argument errors; scales 1 and 3000 (pieces) | 1, 2, 3, 4, 5, 8; 5 over 2 nodes; 7 on 3 pretend nodes; 6 and 3 with algorithms forced |
//! | `nonblocking_collectives` | `nbc.c`: every MPI_I* collective (counts 1 and 3000, every root class, in place), four in flight completed in reverse by Waitall and by Test loops, an Ibarrier interleaved with a Send/Recv only a non-blocking barrier survives, a non-commutative Ireduce/Iscan, an Ibcast that must advance while its forwarding rank waits in each blocking call (Recv, Probe, Mprobe, Wait, Waitany, Ssend, a Barrier), two communicators at once, Cancel refused | 1, 2, 3, 4, 5, 8; 5 over 2 nodes |
//! | `neighbourhood_collectives` | `neighbor.c`: Dist_graph_create(_adjacent) with and without weights, Dist_graph_neighbors(_count), Topo_test; Neighbor_allgather(v) and Neighbor_alltoall(v/w), blocking and not, on periodic (one rank as both neighbours) and non-periodic Cartesian grids (MPI_PROC_NULL slots untouched), a graph, a distributed graph with double edges; no topology: MPI_ERR_TOPOLOGY | 1, 2, 3, 4, 6; 4 over 2 nodes |
//! | `collective_areas` | `coll_area.c`: Barrier, Bcast, Reduce, Allreduce through the shared collective areas — every root, in place, a non-commutative operation (rank order), sizes inside and just past the banks (256 B and 2 KiB), 2,000 barriers and 300 rounds back to back, a dup, a split and WORLD reversed used alternately, 40 communicators created and freed (areas recycled: none refused), 12 at once (5 refused: messages); the areas claimed and refused counted in the debug log; on by default and with `NEMESIS_COLL_AREA=1`, also in block wait mode; with `NEMESIS_COLL_AREA=0` none claimed | 2, 3, 4 |
//! | `a_member_dying_in_a_collective_area_is_proc_failed` | `coll_area_death.c` with `--keep-going`: the last rank SIGKILLs itself; the others' Allreduce, Bcast from it and Barrier return `MPIX_ERR_PROC_FAILED` (a Bcast from a live root may succeed), never hang | 2, 3 |
//! | `collectives_every_algorithm` | the same with each algorithm forced (`NEMESIS_COLL_ALG`) | 3, 4, 6 |
//! | `collectives_on_two_levels` | the same over 2 nodes (`nemesis-run --nodes`, TCP between them) and 3 pretend nodes (`NEMESIS_COLL_NODES`) | 5, 7 |
//! | `one_sided_across_nodes` | `win_remote.c` over 2 nodes (TCP; with the `rdma` feature `--netmod ofi`, `tcp;ofi_rxm`) and on one node: Put/Get under fence (contiguous and strided on either side), 1 MiB put and get, a put's buffer reused after Win_flush_local, Accumulate and Fetch_and_op from every rank on one counter under shared locks (local and remote origins at once: exact sums), Compare_and_swap (one winner), Get_accumulate with MPI_NO_OP and MPI_REPLACE, Win_create with PSCW, Rput/Rget/Raccumulate/Rget_accumulate in lock_all with flush/flush_local_all, MPI_ERR_RMA_RANGE, a dynamic window, passive target progress while the target computes 2 s without calling MPI; MPI_Query_thread unchanged; validated on MPICH (with its asynchronous progress) | 2, 4; 5 yielding over 2 nodes; 1, 3 |
//! | `one_sided_by_netmod_rma` | with the `rdma` feature, over 2 nodes `--netmod ofi` on `tcp;ofi_rxm` and `shm`: `win_remote.c`, `win_ops.c`, `win_sync.c`, `win_atomic.c` with Put/Get by `fi_write`/`fi_read` (the `mpi::win::ofi` log lines at each window's free show win_remote's 1 MiB put and get went by RMA); `NEMESIS_OFI_RMA=off`: none did | 4, 2 |
//! | `one_sided_by_nic_atomics` | `win_nic.c`: Fetch_and_op (a permutation), Accumulate of int64/double/int BXOR and CAS increments on one target's counters from every rank, its own included (exact totals), Get_accumulate NO_OP, `nemesis_nic_atomics` reported; Rput/Rget/Raccumulate/Rget_accumulate with Wait, Testall, Waitall. With `rdma`, over 2 nodes `--netmod ofi` (`tcp;ofi_rxm`, `shm`): one rank per node, the accumulates by `fi_*atomic` (the atomics counted in the `mpi::win::ofi` log line at each window's free); two per node, `NEMESIS_OFI_RMA=off` and `udp;ofi_rxd` (no loopback): none | 1, 2; 3, 4 yielding; 4 over 2 nodes; 2, 4 over ofi |
//! | `across_nodes` | `comms.c` and `pingpong.c` over 2 nodes: TCP, and with the `rdma` feature `--netmod ofi` (`tcp;ofi_rxm`, `shm`) | 4, 2 |
//! | `communicators` | `comms.c`: split, dup, free, SELF, isolation of contexts | 1, 2, 4, 7 |
//! | `nonblocking_in_any_order` | `nonblocking.c`: Waitany, Testall, Test/Wait shuffled, non-overtaking | 1, 2, 3, 4 |
//! | `errors_return_their_classes` | `errors.c` under MPI_ERRORS_RETURN | 2 |
//! | `errors_are_fatal_by_default` | `fatal.c`: the job ends naming the call and rank | 2 |
//! | `a_dead_peer_is_proc_failed` | `peer_death.c` with `--keep-going` | 2 |
//! | `pretend_nodes_listen_on_loopback` | `ring.c` over 2 pretend nodes: the netmods listen on 127.0.0.1 | 2 |
//! | `a_write_to_a_dead_remote_peer_is_proc_failed_not_sigpipe` | `broken_pipe.c` over 2 nodes: writes to a socket the dead peer closed (EPIPE), `MPIX_ERR_PROC_FAILED` and no SIGPIPE | 2 |
//! | `pmpi_wrappers_in_the_program` | `pmpi.c`: the program's own MPI_Send etc. call PMPI_ | 3 |
//! | `pmpi_tool_preloaded` | `pmpi_tool.c` as an LD_PRELOAD library over `pingpong.c` | 2 |
//! | `environment` | `env.c`: init/finalize queries, thread level, clocks, sizes | singleton, 2 |
//! | `sessions` | `session_models.c` in three orders (`SESSION_MODE`): sessions only (two at once, psets mpi://WORLD, mpi://SELF, nemesis://NODE with their info and groups, Comm_create_from_group doing collectives and p2p, Intercomm_create_from_groups and a merge, hints, session error handlers, bad input; sessions again after all ended, then MPI_Init/MPI_Finalize while one is open), MPI_Init then a session (its communicator used after MPI_Finalize), a session then MPI_Init (the world used after MPI_Session_finalize) | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `session_buffer` | `session_buffer.c`: a session's buffer for buffered sends on a communicator from its process set (not another session's; the communicator's own first), `MPI_Session_flush_buffer`/`iflush_buffer`, the detach waiting and giving the buffer back (`int` and `_c`), `MPI_BUFFER_AUTOMATIC`, a buffer attached at `MPI_Session_finalize`, bad input | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `environment_calls` | `env_calls.c`: MPI_T before MPI_Init, nested, after MPI_Finalize (no variable: counts 0, MPI_T_ERR_INVALID_INDEX/NAME/HANDLE/SESSION returned), Remove_error_class/code/string and their refusals, Abi_get_version/info, Get_hw_resource_info, Cart_map/Graph_map with MPICH's answers to bad input | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `info_calls` | `info_calls.c`: Info_create_env before and after MPI_Init, Info_get_string (length query, cut value, missing key, bad key, bad length, freed info), MPI_INFO_ENV's maxprocs | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `make_project` | `tests/make/`: `CC=mpi/bin/mpicc make`, then run | 3 |
//! | `mpicc_wrapper` | `-show`, a missing library | — |
//! | `hydra` | `ring.c` under `mpiexec.hydra` (skips if missing, fails if `CI=true`) | 3 |
//! | `checkpoints` | `checkpoint.c`: `MPIX_Checkpoint`, `MPIX_Checkpoint_restore`, their `PMPIX_` twins, with and without fault tolerance | 4 |
//! | `ft_stencil_c_recovers_a_killed_rank` | `examples/ft_stencil.c` under `nemesis-run --ft-groups 4`, a rank killed from outside mid-run: its group restarts from its checkpoint and the checksum is the failure-free one | 8 |
//! | `ft_stencil_checksums` | `examples/ft_stencil.c` and the Rust `examples/ft_stencil.rs`: the same checksum with fault tolerance off and on (one node, two nodes) | 4 |
//! | `nemesis_log_from_a_c_program` | `ring.c` with `NEMESIS_LOG=debug`: `MPI_Init` installs nemesis's logger (plain lines on stderr) | 2 |
//! | `ring_under_nemesis_run_pmi2`, `ring_under_hydra_pmi2` | `ring.c` with `NEMESIS_PMI=2` | 4 |
//! | `ring_under_srun_pmi2`, `ring_under_srun_pmix` | `ring.c` under `srun --mpi=pmi2`, `--mpi=pmix` (a running Slurm: `.ci/slurm-up`; skips without, fails if `CI=true`) | 4 |
//! | `ring_under_openmpi` | `ring.c` under `mpiexec.openmpi` (PMIx) | 4 |
//! | `idup_beside_other_creations_and_collectives` | `coll_idup.c`: Ibarrier/Ibcast/Iallreduce/Iscan on a communicator while idups of it are pending (results checked), NBCs and blocking collectives on the new communicators; idup and Iallreduce of two communicators in opposite orders; Comm_create_group and Comm_split on WORLD while an idup of it is pending, started before it on some ranks and after it on others | 1–8; 5 over 2 nodes |
//! | `persistent_collectives` | `coll_persistent.c`: the 22 persistent collectives (and `Bcast`/`Allreduce`/`Alltoallv`/`Neighbor_alltoallw_init_c`) made once with an info, started 5 times with new data by Startall or Start, completed by Waitall, Wait in reverse, Testall, Waitsome, results checked each time; Request_free (one active); bad root, count, op, datatype, communicator, null request, no topology, Start of an active request | 1–8; 5 over 2 nodes |
//! | `persistent_collectives_in_place` | `coll_persistent_inplace.c`: Gather/Gatherv/Scatter/Scatterv_init with `MPI_IN_PLACE` at the root and Alltoallv_init in place, the ignored side `MPI_DATATYPE_NULL`, 3 starts each | 1, 2, 3, 5; 4 over 2 nodes |
//! | `spawns_from_every_rank_at_once` | `spawn_self.c`: every rank spawns 2 children on `MPI_COMM_SELF` at once, 3 rounds, each child answering its parent | 2, 3, 4 (`--universe-size 40`) |
//! | `large_count_collectives` | `coll_large.c`: every blocking and non-blocking `_c` collective and neighbourhood collective, results checked; `MPI_Bcast_c` of 2^31 + 64 bytes; negative counts, a count array entry above INT_MAX, bad root, no topology | 1–8; 5 over 2 nodes; 2 with the large broadcast |
//! | `spawn_parents_and_children` | `spawn_basic.c` under `--universe-size`: 1–3 parents spawn 1–3 children (root first or last), p2p both ways, Bcast and Allreduce over the intercommunicator, merge, a second connection through a published port, disconnect; one node, `--nodes 2`, PMI-2, 5 spawns in a row, `--tag-output` | 1, 2, 3, 4 (+1–4) |
//! | `spawn_multiple_commands` | `spawn_multiple.c`: two commands, one children's world, `MPI_APPNUM` per command | 1, 2 (+3) |
//! | `spawn_refused_with_the_reason` | `spawn_errors.c`: no room in the universe, a singleton, Hydra: `MPI_ERR_SPAWN` at every rank, errcodes filled, the reason in the fatal message; bad arguments and port/name errors | 1, 2 |
//! | `ports_between_halves_of_a_job` | `dynproc_ports.c`: accept/connect between two halves, by a message and by published name; one node and `--nodes 2` | 1, 2, 3, 5; 4, 8 |
//! | `join_over_a_socket` | `dynproc_join.c`: `MPI_Comm_join` between pairs over loopback TCP | 1, 2, 3, 4; 2, 8 over 2 nodes |
//! | `error_handlers_of_every_kind` | `errh_objects.c`: File/Win/Session_create_errhandler; `MPI_FILE_NULL`'s handler (`MPI_ERRORS_RETURN` at first; set, got, called, file errors reaching it); the window calls on `MPI_WIN_NULL`; handlers of the wrong kind (`MPI_ERR_ARG`), null or freed ones (`MPI_ERR_ARG`, as MPICH); handles from Comm/Session/File_get_errhandler freed 100 times over, a handler freed in use working until its last user lets go; predefined handlers freed | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `communicators_keep_their_lineage` | `comm_lineage.c` (Sessions model): communicators derived from a session's (dup, idup, split, split_type, create, create_group, Intercomm_create, merge) keep its error handler and its buffer for buffered sends, another session's have none; hints: the four assertions only, copied by dup/idup, replaced by dup_with_info/idup_with_info/split_type's info, defaults after split; split types HW_GUIDED, RESOURCE_GUIDED (`mpi_shared_memory`: the node; else `MPI_COMM_NULL`), HW_UNGUIDED (by node over nodes, `MPI_COMM_NULL` on one), an unknown one | 1, 2, 3, 4, 8; 5 over 2 nodes |
//! | `intercommunicator_nonblocking_and_persistent_collectives` | `inter_nbc.c`: intercommunicators of groups 1 and n-1, halves, n-1 and 1; every collective with an intercommunicator form (and `Bcast_c`/`Allreduce_c`) blocking vs non-blocking vs persistent (started twice with new data), element by element with sentinel-filled receive buffers, counts 2 and 3000, a strided type in some, roots in either group; seven non-blocking and persistent ones in flight completed by one Waitall in reverse; `MPI_IN_PLACE`, bad roots, Iscan/Exscan_init refused | 2, 3, 4; 5, 8 yielding; 5 over 2 nodes |
//! | `intercommunicator_roots_arguments_by_role` | `inter_roles.c`: rooted collectives on intercommunicators (Reduce, Bcast, Gather(v), Scatter(v); blocking, non-blocking, persistent): `MPI_PROC_NULL` callers passing NULL, count 0, `MPI_DATATYPE_NULL`/`MPI_BYTE` with `MPI_SUM`/`MPI_OP_NULL`, the root's send side and the members' receive side null, results checked; Reduce with count 0 in every form (no hang, nothing written) and Allreduce with count 0; `MPI_IN_PLACE` at Gatherv/Scatterv/Gather/Reduce members and the Gatherv root refused (by some processes only: the non-blocking collectives after it still match); Alltoallw_init with a strided type and Reduce_init with a user operation freed before the starts, new ones made meanwhile | 2, 3, 4; 5 yielding; 5 over 2 nodes |
//! | `one_sided_windows` | `win_create.c`: every window flavour (create, allocate, allocate_shared contiguous and noncontig, dynamic with attach/detach) in int and `_c` forms, size 0 on every third rank; WIN_BASE/SIZE/DISP_UNIT/CREATE_FLAVOR/MODEL, names, info, get_group, keyvals deleted at free, shared_query (contiguity, PROC_NULL), error handlers (ERRORS_RETURN, a counting one, call_errhandler); 200 create/free rounds | 1, 2, 3, 4; 8 yielding; 5 over 2 nodes |
//! | `one_sided_on_alloc_mem` | `win_allocmem.c`: MPI_Win_create over MPI_Alloc_mem memory (node peers map it): a window over part of a block between guard bytes, Put/Get/Accumulate/Fetch_and_op/Compare_and_swap from every rank to every rank (exact results), RMA_RANGE with the guards untouched, two windows in one block, the same on malloc memory, 100 create/free rounds leaving no descriptor open, Free_mem before Win_free (kept until the window goes; memory allocated after is fresh) | 1, 2, 3, 4; 8 yielding; 4 over 2 nodes |
//! | `one_sided_operations` | `win_ops.c`: Put, Get, Accumulate, Get_accumulate, Fetch_and_op, Compare_and_swap, the R- and `_c` forms; int, long long, double, pairs, derived types on either side; every predefined op, REPLACE, NO_OP, MINLOC/MAXLOC; zero counts, PROC_NULL; to self and to the next rank; every flavour under fence, PSCW, lock, lock_all, checked against a Pack/Reduce_local model | 1, 2, 3, 4; 8 yielding; 4 over 2 nodes (TCP; with `rdma` OFI) |
//! | `one_sided_synchronisation` | `win_sync.c`: fences with NOPRECEDE/NOSTORE/NOPUT/NOSUCCEED; PSCW among neighbours, Win_test loops, Win_test true at once after an empty epoch's complete and a barrier, a subset, NOCHECK; exclusive-lock read-modify-write, shared locks, lock_all with flush/flush_all/flush_local/flush_local_all, a flushed Put seen after a message; Win_sync load/store on a shared window | 1, 2, 3, 4; 8 yielding; 5 over 2 nodes |
//! | `one_sided_atomics_under_contention` | `win_atomic.c`: every rank on one counter with Fetch_and_op (a permutation) and CAS (exact), accumulates of doubles and ints (exact), a CAS mutex around Get/Put, a distributed linked list in dynamic windows (each element once) | 1, 2, 3, 4; 8 yielding; 4 over 2 nodes (TCP; with `rdma` OFI) |
//! | `one_sided_lock_fairness_and_progress` | `win_fairness.c`: a shared locker among exclusive lockers finishes its locks (no starvation); origins lock/put/get/fop/unlock a target computing without MPI calls and finish before it does | 1, 2, 3, 4; 8 yielding; 4 over 2 nodes |
//! | `one_sided_a_dead_holder_fails_its_waiters` | `win_robust.c` with `--keep-going`: the last rank SIGKILLs itself holding rank 0's exclusive lock, or inside a long-double accumulate under rank 0's accumulate mutex (retried if the kill fell between two calls); the others' `MPI_Win_lock` (exclusive and shared) and `MPI_Accumulate` return `MPIX_ERR_PROC_FAILED` within 10 s, never hang; `rlock` (4 over 2 nodes): a remote origin's lock request at a target whose node-local holder died is answered `MPIX_ERR_PROC_FAILED`; `size`: a get whose target type repeats one double 2^23 + 1 times is `MPI_ERR_SIZE` from a target on another node (its reply limit), 2^23 moves, the window works after | 2, 3; 4 and 2 over 2 nodes |
//! | `one_sided_errors` | `win_errors.c` under MPI_ERRORS_RETURN: RMA_RANGE (memory past the window untouched), DISP, TYPE, OP, COUNT, RANK, RMA_SYNC (no epoch, R-ops in a fence epoch, nested locks), WIN, LOCKTYPE, ASSERT, RMA_FLAVOR, RMA_ATTACH, SIZE | 1, 2, 3, 4; 8 yielding; 4 over 2 nodes |
//!
//! PMIx needs `libmpi.so` built with the `pmix` feature (`cargo test -p nemesis-mpi --features
//! pmix`); without it the PMIx launchers' ranks must refuse to start, naming the feature.
//!
//! The library, the launcher and the Rust example `ft_stencil` are built first (`cargo build -p
//! nemesis-mpi -p nemesis` in the same profile and target directory): cargo does not build a
//! `cdylib` for integration tests.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

#[test]
fn pingpong() {
    run_ok("pingpong", &[2, 3], &[], &[]);
}

#[test]
fn deferred_receives() {
    run_ok("deferred", &[2, 3], &[], &[]);
    for wait in ["poll", "yield", "block"] {
        run_ok("deferred", &[2], &["--wait", wait], &[]);
    }
    run_ok("deferred", &[2], &[], &[("NEMESIS_DEFER_RECV", "0")]);
    // Fault tolerance on: no receive is deferred (the general path runs the hooks).
    run_ok("deferred", &[2], &["--ft-groups", "2"], &[]);
}

#[test]
fn fused_send_and_receive() {
    run_ok("fastpath", &[2, 3], &[], &[]);
    // Fault tolerance on (every message logged between the two groups): the general path.
    run_ok("fastpath", &[2], &["--ft-groups", "2"], &[]);
}

#[test]
fn one_sided_smoke() {
    run_ok("win_smoke", &[1, 2, 3], &[], &[]);
    run_ok("win_smoke", &[4], &["--wait", "yield"], &[]);
    // Fault tolerance: a window across FT groups is refused, one inside a group works.
    run_ok("win_smoke", &[2], &["--ft-groups", "2"], &[("WIN_SMOKE_FT", "1")]);
}

#[test]
fn p2p_modes() {
    run_ok("p2p_modes", &[2, 3], &[], &[]);
}

#[test]
fn cancel_and_matched_probes() {
    run_ok("cancel_mprobe", &[2, 3], &[], &[]);
    // Between nodes: the cancellations travel through the TCP netmod.
    run_ok("cancel_mprobe", &[2], &["--nodes", "2"], &[]);
}

#[test]
fn thread_multiple() {
    run_ok("threads", &[2, 3], &[], &[]);
}

#[test]
fn datatypes() {
    run_ok("datatypes", &[2, 3], &[], &[]);
    // Large messages in pieces through the copy rings only, and between nodes (staged for TCP).
    run_ok("datatypes", &[2], &[], &[("NEMESIS_LMT", "ring")]);
    run_ok("datatypes", &[2], &["--nodes", "2"], &[]);
}

#[test]
fn groups_and_communicators() {
    // More dup/free rounds than a process has contexts (4096) on 2 ranks; a few on more (7
    // spinning ranks on 2 cores make each round slow).
    run_ok("groups", &[1, 2], &[], &[]);
    run_ok("groups", &[3, 4, 7], &[], &[("GROUPS_ROUNDS", "100")]);
    // Two nodes: MPI_COMM_TYPE_SHARED splits along them.
    run_ok("groups", &[5], &["--nodes", "2"], &[("GROUPS_NODES", "2"), ("GROUPS_ROUNDS", "500")]);
}

#[test]
fn intercommunicators() {
    // Uneven halves (a third and the rest, one in reversed order) and interleaved halves.
    run_ok("intercomm", &[1, 3, 4, 5, 6, 7, 8], &[], &[]);
    // 1200 create/dup/merge/free rounds take 7200 contexts, more than a process has: none leaks.
    run_ok("intercomm", &[2], &[], &[("INTERCOMM_ROUNDS", "1200")]);
    // Two nodes: the local steps of the collectives run on two levels, the leaders over TCP.
    run_ok("intercomm", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn nonblocking_communicator_duplication() {
    run_ok("idup", &[1, 2, 3, 4, 7], &[], &[]);
    run_ok("idup", &[5], &["--nodes", "2"], &[("IDUP_ROUNDS", "5")]);
}

#[test]
fn user_operations() {
    run_ok("user_ops", &[1, 2, 3, 4, 5, 8], &[], &[]);
    for alg in [
        "allreduce=recursive-doubling,reduce=binomial",
        "allreduce=rabenseifner,reduce=rabenseifner",
        "allreduce=reduce-bcast,reduce=flat",
    ] {
        run_ok("user_ops", &[3, 4, 6], &[], &[("NEMESIS_COLL_ALG", alg)]);
    }
    // Over two nodes (and three pretend ones): the non-commutative operation skips the levels.
    run_ok("user_ops", &[5], &["--nodes", "2"], &[]);
    run_ok("user_ops", &[7], &[], &[("NEMESIS_COLL_NODES", "3")]);
}

#[test]
fn callbacks_may_call_mpi() {
    // A callback that calls MPI deadlocked under MPI_THREAD_MULTIPLE (the lock was held) and
    // aliased the state below it; the job's time limit turns a hang into a failure.
    // (8 ranks under MULTIPLE, each with a busy second thread, take 15 s on 2 cores: not here.)
    for (level, ranks) in [("single", &[1, 2, 4, 8][..]), ("multiple", &[1, 2, 4])] {
        for prog in ["reentrant_attrs", "reentrant_ops"] {
            run_ok(prog, ranks, &[], &[("REENTRANT_LEVEL", level)]);
            run_ok(prog, &[3], &["--nodes", "2"], &[("REENTRANT_LEVEL", level)]);
        }
    }
}

#[test]
fn attributes_info_and_memory() {
    run_ok("attrs", &[1, 2, 3], &[], &[]);
}

#[test]
fn program_error_handlers() {
    run_ok("errhandlers", &[1, 2], &[], &[]);
}

#[test]
fn topologies() {
    run_ok("topo", &[1, 2, 3, 4, 6, 7], &[], &[]);
}

#[test]
fn ring() {
    run_ok("ring", &[1, 2, 3, 5, 8], &[], &[]);
}

#[test]
fn collectives_by_the_model() {
    run_ok("collectives", &[1, 2, 3, 4, 5, 8], &[], &[]);
    // The small ones by point-to-point messages (the collective areas take them by default).
    run_ok("collectives", &[2, 3, 4], &[], &[("NEMESIS_COLL_AREA", "0")]);
}

#[test]
fn nonblocking_collectives() {
    run_ok("nbc", &[1, 2, 3, 4, 5, 8], &[], &[]);
    run_ok("nbc", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn neighbourhood_collectives() {
    run_ok("neighbor", &[1, 2, 3, 4, 6], &[], &[]);
    run_ok("neighbor", &[4], &["--nodes", "2"], &[]);
}

#[test]
fn irregular_collectives() {
    run_ok("vcoll", &[1, 2, 3, 4, 5, 8], &[], &[]);
    run_ok("vcoll", &[5], &["--nodes", "2"], &[]);
    run_ok("vcoll", &[7], &[], &[("NEMESIS_COLL_NODES", "3")]);
    // Derived types beside basic ones run the same algorithms: each forced in turn.
    let forced = "bcast=binomial,gather=binomial,scatter=binomial,allgather=bruck";
    run_ok("vcoll", &[6], &[], &[("NEMESIS_COLL_ALG", forced)]);
    let forced = "bcast=chain,allgather=gather-bcast,gather=flat,scatter=flat";
    run_ok("vcoll", &[3], &[], &[("NEMESIS_COLL_ALG", forced), ("NEMESIS_COLL_SEGMENT", "1000")]);
}

/// Areas claimed and refused in a job's debug log (`mpi::coll::area`).
fn areas_in_log(o: &std::process::Output) -> (usize, usize) {
    let err = String::from_utf8_lossy(&o.stderr);
    let count = |what: &str| err.lines().filter(|l| l.contains(what)).count();
    (count("collective area claimed"), count("no collective area free"))
}

#[test]
fn collective_areas() {
    let prog = compile("coll_area", false);
    let log = ("NEMESIS_LOG", "warn,mpi::coll::area=debug");
    let on = ("NEMESIS_COLL_AREA", "1");
    for n in [2u32, 3, 4] {
        let o = job(n, &prog, &[], &[log, on]);
        assert_all_ok(&o, "coll_area", n);
        // WORLD, the dup, the reversed WORLD, the parity halves of two members or more, 40 created
        // and freed one after the other, then 7 of the 12 held at once (WORLD holds the 8th).
        let halves = [0, 0, 1, 2][n as usize - 1];
        assert_eq!(areas_in_log(&o), (50 + halves, 5), "areas claimed and refused on {n} ranks: {}", show(&o));
    }
    let o = job(4, &prog, &["--wait", "block"], &[log, on]);
    assert_all_ok(&o, "coll_area", 4);
    assert_eq!(areas_in_log(&o), (52, 5), "{}", show(&o));
    // On by default.
    let o = job(3, &prog, &[], &[log]);
    assert_all_ok(&o, "coll_area", 3);
    assert_eq!(areas_in_log(&o), (51, 5), "by default: {}", show(&o));
    let o = job(3, &prog, &[], &[log, ("NEMESIS_COLL_AREA", "0")]);
    assert_all_ok(&o, "coll_area", 3);
    assert_eq!(areas_in_log(&o), (0, 0), "NEMESIS_COLL_AREA=0: {}", show(&o));
}

#[test]
fn a_member_dying_in_a_collective_area_is_proc_failed() {
    let prog = compile("coll_area_death", false);
    for n in [2u32, 3] {
        let o = job(n, &prog, &["--keep-going"], &[("NEMESIS_COLL_AREA", "1")]);
        let text = String::from_utf8_lossy(&o.stdout);
        for r in 0..n - 1 {
            let ok = format!("OK coll_area_death {r}");
            assert!(text.lines().any(|l| l.trim() == ok), "rank {r} of {n}: {}", show(&o));
        }
    }
}

#[test]
fn collectives_every_algorithm() {
    let variants = [
        "bcast=flat,reduce=flat,allreduce=reduce-bcast,gather=flat,scatter=flat,allgather=ring,barrier=fan",
        "bcast=binomial,reduce=binomial,allreduce=recursive-doubling,gather=binomial,scatter=binomial,\
         allgather=bruck,barrier=dissemination",
        "bcast=chain,reduce=rabenseifner,allreduce=rabenseifner,allgather=gather-bcast",
    ];
    // 3 and 6 ranks: one and two ranks beyond a power of two (the folds of the power-of-two
    // algorithms); 4 for the chain/Rabenseifner variant without a fold.
    for (v, ranks) in variants.iter().zip([&[3, 6][..], &[3, 6], &[3, 4, 6]]) {
        // Small chain segments: many pieces in flight, not a multiple of the element sizes.
        run_ok("collectives", ranks, &[], &[("NEMESIS_COLL_ALG", v), ("NEMESIS_COLL_SEGMENT", "1000")]);
    }
}

#[test]
fn collectives_on_two_levels() {
    // Real nodes: separate segments, TCP between them (`nemesis-run --nodes`).
    run_ok("collectives", &[5], &["--nodes", "2"], &[]);
    // Pretend nodes over one segment, with other algorithms at the node level.
    run_ok("collectives", &[7], &[], &[("NEMESIS_COLL_NODES", "3"), ("NEMESIS_COLL_ALG", "barrier=fan,bcast=chain")]);
}

#[test]
fn across_nodes() {
    run_ok("comms", &[4], &["--nodes", "2"], &[]);
    run_ok("pingpong", &[2], &["--nodes", "2"], &[]);
    if cfg!(feature = "rdma") {
        for prov in ["tcp;ofi_rxm", "shm"] {
            let env = [("NEMESIS_OFI_PROVIDER", prov), ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1")];
            run_ok("comms", &[4], &["--nodes", "2", "--netmod", "ofi"], &env);
            run_ok("pingpong", &[2], &["--nodes", "2", "--netmod", "ofi"], &env);
        }
    }
}

#[test]
fn one_sided_across_nodes() {
    run_ok("win_remote", &[2, 4], &["--nodes", "2"], &[]);
    run_ok("win_remote", &[5], &["--nodes", "2", "--wait", "yield"], &[]);
    // The same program on one node: the direct paths, no progress thread.
    run_ok("win_remote", &[1, 3], &[], &[]);
    if cfg!(feature = "rdma") {
        let env = [("NEMESIS_OFI_PROVIDER", "tcp;ofi_rxm"), ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1")];
        run_ok("win_remote", &[2, 4], &["--nodes", "2", "--netmod", "ofi"], &env);
    }
}

/// Bytes (put, got) that windows moved by netmod RMA, from their `mpi::win::ofi` log lines.
fn rma_bytes_in_log(o: &std::process::Output) -> (u64, u64) {
    (rma_log_sum(o, "put="), rma_log_sum(o, "got="))
}

/// The sum of field `key` (`put=`, `got=`, `atomics=`) over the `mpi::win::ofi` lines logged at
/// each window's free.
fn rma_log_sum(o: &std::process::Output, key: &str) -> u64 {
    let err = String::from_utf8_lossy(&o.stderr);
    err.lines()
        .filter(|l| l.contains("bytes moved by netmod RMA"))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix(key)).and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

#[test]
fn one_sided_by_netmod_rma() {
    if !cfg!(feature = "rdma") {
        return;
    }
    let log = ("NEMESIS_LOG", "warn,mpi::win::ofi=debug");
    for prov in ["tcp;ofi_rxm", "shm"] {
        let env = [("NEMESIS_OFI_PROVIDER", prov), ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1"), log];
        let args = ["--nodes", "2", "--netmod", "ofi"];
        for prog in ["win_remote", "win_ops", "win_sync", "win_atomic"] {
            let n = if prog == "win_remote" { 4 } else { 2 };
            let o = job(n, &compile(prog, false), &args, &env);
            assert_all_ok(&o, prog, n);
            if prog == "win_remote" {
                let (put, got) = rma_bytes_in_log(&o);
                // Its 1 MiB put and get at least went by fi_write and fi_read.
                assert!(put >= 1 << 20 && got >= 1 << 20, "{prov}: put {put}, got {got}: {}", show(&o));
            }
        }
        // NEMESIS_OFI_RMA=off: the active messages carry everything.
        let off = [env[0], env[1], log, ("NEMESIS_OFI_RMA", "off")];
        let o = job(4, &compile("win_remote", false), &args, &off);
        assert_all_ok(&o, "win_remote", 4);
        assert_eq!(rma_bytes_in_log(&o), (0, 0), "{}", show(&o));
    }
}

#[test]
fn one_sided_by_nic_atomics() {
    run_ok("win_nic", &[1, 2], &[], &[]);
    run_ok("win_nic", &[3, 4], &["--wait", "yield"], &[]);
    run_ok("win_nic", &[4], &["--nodes", "2", "--wait", "yield"], &[]);
    if !cfg!(feature = "rdma") {
        return;
    }
    let log = ("NEMESIS_LOG", "warn,mpi::win::ofi=debug");
    let prog = compile("win_nic", false);
    for prov in ["tcp;ofi_rxm", "shm"] {
        let env = [("NEMESIS_OFI_PROVIDER", prov), ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1"), log];
        let args = ["--nodes", "2", "--netmod", "ofi"];
        // One rank per node: accumulates by fi_*atomic (the first window's; the second refused
        // them by info), Rput/Rget by fi_write/fi_read.
        let on = [env[0], env[1], env[2], ("EXPECT_NIC", "true")];
        let o = job(2, &prog, &args, &on);
        assert_all_ok(&o, "win_nic", 2);
        let (atomics, got) = (rma_log_sum(&o, "atomics="), rma_log_sum(&o, "got="));
        // Each rank's 200 rounds: fetch_and_op, 3 accumulates, at least one CAS, a BXOR.
        assert!(atomics >= 2 * 200 * 6, "{prov}: {atomics} atomics: {}", show(&o));
        assert!(got >= 2 * 64 * 4, "{prov}: Rget bytes by fi_read {got}: {}", show(&o));
        // Two ranks per node: node-local origins use CPU atomics, so no window may use the
        // provider's; the totals stay exact.
        let off = [env[0], env[1], env[2], ("EXPECT_NIC", "false")];
        let o = job(4, &prog, &["--nodes", "2", "--netmod", "ofi", "--wait", "yield"], &off);
        assert_all_ok(&o, "win_nic", 4);
        assert_eq!(rma_log_sum(&o, "atomics="), 0, "{prov}: {}", show(&o));
        // NEMESIS_OFI_RMA=off: active messages only.
        let o = job(2, &prog, &args, &[env[0], env[1], log, ("EXPECT_NIC", "false"), ("NEMESIS_OFI_RMA", "off")]);
        assert_all_ok(&o, "win_nic", 2);
        assert_eq!(rma_log_sum(&o, "atomics="), 0, "{prov}: {}", show(&o));
    }
    // udp;ofi_rxd has atomics but no loopback (the netmod refuses it): a target's own
    // accumulates cannot go through the provider, so none do.
    let env = [
        ("NEMESIS_OFI_PROVIDER", "udp;ofi_rxd"),
        ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1"),
        log,
        ("EXPECT_NIC", "false"),
    ];
    let o = job(2, &prog, &["--nodes", "2", "--netmod", "ofi"], &env);
    assert_all_ok(&o, "win_nic", 2);
    assert_eq!(rma_log_sum(&o, "atomics="), 0, "udp;ofi_rxd: {}", show(&o));
}

#[test]
fn communicators() {
    run_ok("comms", &[1, 2, 4, 7], &[], &[]);
}

#[test]
fn nonblocking_in_any_order() {
    run_ok("nonblocking", &[1, 2, 3, 4], &[], &[]);
}

#[test]
fn errors_return_their_classes() {
    run_ok("errors", &[2], &[], &[]);
}

#[test]
fn errors_are_fatal_by_default() {
    let o = job(2, &compile("fatal", false), &[], &[]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "the job must fail: {}", show(&o));
    assert!(!out.contains("UNREACHABLE"), "{}", show(&o));
    let line = err.lines().find(|l| l.contains("MPI_Send failed")).unwrap_or_else(|| panic!("{}", show(&o)));
    assert!(line.contains("rank 1") && line.contains("MPI_ERR_RANK") && line.contains("rank 7"), "{line}");
}

#[test]
fn a_dead_peer_is_proc_failed() {
    let o = job(2, &compile("peer_death", false), &["--keep-going"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().any(|l| l.trim() == "OK peer_death 0"), "{}", show(&o));
}

#[test]
fn pmpi_wrappers_in_the_program() {
    run_ok("pmpi", &[3], &[], &[]);
}

#[test]
fn pmpi_tool_preloaded() {
    let tool = compile("pmpi_tool", true);
    let prog = compile("pingpong", false);
    let mut c = Command::new(&setup().launcher);
    c.args(["-n", "2", "--", "env"]).arg(format!("LD_PRELOAD={}", tool.display())).arg(&prog);
    let o = run_with_limit(c, Duration::from_secs(60));
    assert_all_ok(&o, "pingpong", 2);
    let text = String::from_utf8_lossy(&o.stdout);
    // pingpong.c's own calls (3 rounds of 14 sizes): rank 0 sends 21 + 3 and receives 42 + 1, rank 1
    // sends 42 + 1 and receives 42 + 3 (its MPI_Ssend and MPI_Sendrecv calls are not MPI_Send
    // calls).
    for want in ["tool: rank 0: 24 MPI_Send, 43 MPI_Recv", "tool: rank 1: 43 MPI_Send, 45 MPI_Recv"] {
        assert!(text.lines().any(|l| l.trim() == want), "missing `{want}`: {}", show(&o));
    }
}

#[test]
fn environment() {
    let prog = compile("env", false);
    // A singleton: no launcher at all.
    let o = run_with_limit(Command::new(&prog), Duration::from_secs(30));
    assert_all_ok(&o, "env", 1);
    run_ok("env", &[2], &[], &[]);
}

#[test]
fn make_project() {
    let s = setup();
    let dir = s.out.join("make-project");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["Makefile", "main.c", "stats.c", "stats.h"] {
        std::fs::copy(s.mpi.join("tests/make").join(f), dir.join(f)).unwrap();
    }
    let o = Command::new("make")
        .current_dir(&dir)
        .env("CC", s.mpi.join("bin/mpicc"))
        .env("NEMESIS_MPI_LIBDIR", &s.profile_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "CC=mpi/bin/mpicc make failed: {}", show(&o));
    let o = job(3, &dir.join("stats"), &[], &[]);
    assert!(o.status.success(), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().any(|l| l == "stats: count 3000 sum 4498500 min 0 max 2999"), "{}", show(&o));
}

#[test]
fn mpicc_wrapper() {
    let s = setup();
    let o = mpicc().args(["-show", "-O2", "-o", "x", "x.c"]).output().unwrap();
    let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let inc = format!("-I{}", s.mpi.join("include").display());
    let lib = format!("-L{}", s.profile_dir.display());
    assert!(line.contains(&inc) && line.contains(&lib) && line.ends_with("-lmpi") && line.contains("-rpath"), "{line}");
    let o = mpicc().args(["-show", "-c", "x.c"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&o.stdout).contains("-lmpi"), "compile-only runs take no link arguments");
    let o = mpicc().env("NEMESIS_MPI_LIBDIR", "/nonexistent").args(["-o", "x", "x.c"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("libmpi.so not found"), "{}", show(&o));
}

#[test]
fn checkpoints() {
    run_ok("checkpoint", &[4], &[], &[]);
    run_ok("checkpoint", &[4], &["--ft-groups", "2"], &[]);
}

/// The `checksum <hex>` line of an ft_stencil run on 4 ranks, and the checkpoints rank 0 reports
/// on standard error (`...; <n> checkpoints, ...`).
fn stencil(prog: &Path, launcher_args: &[&str], args: &[&str]) -> (String, u64) {
    let mut c = Command::new(&setup().launcher);
    c.args(["-n", "4"]).args(launcher_args).arg("--").arg(prog).args(args);
    let o = run_with_limit(c, Duration::from_secs(120));
    assert!(o.status.success(), "{} {launcher_args:?}: {}", prog.display(), show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let sum =
        out.lines().find_map(|l| l.strip_prefix("checksum ")).unwrap_or_else(|| panic!("no checksum: {}", show(&o)));
    let err = String::from_utf8_lossy(&o.stderr);
    let n = err
        .lines()
        .find_map(|l| l.strip_prefix("ft_stencil: ")?.split("; ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no checkpoint count: {}", show(&o)));
    (sum.to_owned(), n)
}

#[test]
fn ft_stencil_checksums() {
    let c = compile_from("examples", "ft_stencil", Cc::Ours);
    let rust = setup().profile_dir.join("examples/ft_stencil");
    // 3000 cells per rank, 400 iterations, a checkpoint every 50: at 50, 100, ..., 350.
    let args = ["3000", "400", "50"];
    let (reference, _) = stencil(&rust, &[], &args);
    for prog in [&c, &rust] {
        for launcher in [&[][..], &["--ft-groups", "2"], &["--ft-groups", "4", "--nodes", "2"]] {
            let (sum, checkpoints) = stencil(prog, launcher, &args);
            assert_eq!(sum, reference, "{} {launcher:?}", prog.display());
            assert_eq!(checkpoints, 7, "{} {launcher:?}", prog.display());
        }
    }
}

/// Recovery with the C API (`MPIX_Checkpoint`, `MPIX_Checkpoint_restore`): `examples/ft_stencil.c`
/// on 8 ranks in 4 groups under `nemesis-run --ft-groups 4`, rank 5 killed from outside (SIGKILL)
/// after its group's second checkpoint: its group is restarted from its checkpoint, one line says
/// so, and the checksum is the failure-free run's (the Rust example's).
#[test]
fn ft_stencil_c_recovers_a_killed_rank() {
    ft_stencil_c_recovers("single", &[(5, 2)]);
}

/// Two ranks of different groups killed in turn (the second once its own group has checkpointed
/// twice more, the first recovery done or not): the halos go by `MPI_Irecv`/`MPI_Isend`/
/// `MPI_Waitall`, whose receives' deliveries follow the application's `Waitall`, not arrivals.
#[test]
fn ft_stencil_c_recovers_failures_in_sequence() {
    ft_stencil_c_recovers("sequence", &[(5, 2), (2, 5)]);
}

/// `mpi/examples/ft_stencil.c` under `nemesis-run --ft`, 8 ranks in 4 groups: each `(rank,
/// generation)` of `kills` in turn, rank `rank` holds after that checkpoint of its own
/// (`tests/c/ft_stencil_hold.c`, the example with a hold after its checkpoints) and is SIGKILLed
/// there: never racing the end of the job. The checksum is the Rust example's failure-free one,
/// and one recovery line per kill names the victim's group.
fn ft_stencil_c_recovers(name: &str, kills: &[(u32, u64)]) {
    let c = compile_from("tests/c", "ft_stencil_hold", Cc::Ours);
    let rust = setup().profile_dir.join("examples/ft_stencil");
    // Long enough to hold the victims (the kills wait for no clock).
    let args = ["64", "1500", "200"];
    let dir = std::env::temp_dir().join(format!("nemesis-c-ftr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The holds' markers, beside the checkpoint directory.
    let held = dir.with_extension("held");
    let run = |prog: &Path, kills: &[(u32, u64)]| -> std::process::Output {
        let _ = std::fs::remove_dir_all(&held);
        std::fs::create_dir_all(&held).unwrap();
        let spec: Vec<String> = kills.iter().map(|(r, g)| format!("{r}:{g}")).collect();
        let mut cmd = Command::new(&setup().launcher);
        cmd.args(["-n", "8", "--ft-groups", "4", "--wait", "yield", "--"]).arg(prog).args(args);
        cmd.env("NEMESIS_FT_DIR", &dir).env("FT_TEST_DIR", &held).env("FT_TEST_HOLD", spec.join(","));
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let child = cmd.spawn().unwrap();
        for &(rank, generation) in kills {
            // The rank holds after that checkpoint, its pid in its marker.
            let t = std::time::Instant::now();
            let marker = held.join(format!("held-{rank}"));
            let pid: u32 = loop {
                if let Some(p) = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse().ok()) {
                    break p;
                }
                assert!(t.elapsed() < Duration::from_secs(120), "rank {rank} never held after checkpoint {generation}");
                std::thread::sleep(Duration::from_millis(5));
            };
            // SAFETY: a signal to a rank of the job this test started (its pid from its marker).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        child.wait_with_output().unwrap()
    };
    let checksum = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).lines().find_map(|l| l.strip_prefix("checksum ").map(str::to_owned))
    };
    let reference = run(&rust, &[]);
    assert!(reference.status.success(), "{}", show(&reference));
    let o = run(&c, kills);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&held);
    assert!(o.status.success(), "{}", show(&o));
    assert_eq!(checksum(&o), checksum(&reference), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" restarted from checkpoint ")).collect();
    assert_eq!(lines.len(), kills.len(), "{}", show(&o));
    for &(rank, _) in kills {
        let (g, first) = (rank / 2, rank / 2 * 2);
        let line = format!(
            "nemesis-run: rank {rank} died (signal 9); group {g} (ranks {first},{}) restarted from ",
            first + 1
        );
        assert!(lines.iter().any(|l| l.starts_with(&line)), "{line}: {}", show(&o));
    }
}

#[test]
fn hydra() {
    let found = Command::new("mpiexec.hydra").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(!ci(), "mpiexec.hydra is missing (apt-get install mpich) and CI=true");
        eprintln!("SKIPPED: mpiexec.hydra not found (apt-get install mpich)");
        return;
    }
    let prog = compile("ring", false);
    let mut c = Command::new("mpiexec.hydra");
    c.args(["-n", "3"]).arg(&prog);
    let o = run_with_limit(c, Duration::from_secs(60));
    assert_all_ok(&o, "ring", 3);
}

#[test]
fn a_write_to_a_dead_remote_peer_is_proc_failed_not_sigpipe() {
    let o = job(2, &compile("broken_pipe", false), &["--nodes", "2", "--keep-going"], &[("NEMESIS_LOG", "warn")]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(out.lines().any(|l| l.starts_with("OK broken_pipe 0 after ")), "{}", show(&o));
    // The survivor learnt of the death from a write (not from reading the end of stream).
    assert!(err.contains("write: Broken pipe"), "{}", show(&o));
}

/// True if `cmd args` exits 0 within `secs` seconds.
fn answers(cmd: &str, args: &[&str], secs: u64) -> bool {
    Command::new("timeout").arg(secs.to_string()).arg(cmd).args(args).output().is_ok_and(|o| o.status.success())
}

/// Whether `what` can run here: skips (false) if not, but fails under `CI=true`.
fn needs(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(!ci(), "{what} is missing and CI=true");
        eprintln!("SKIPPED: needs {what}");
    }
    ok
}

/// Whether a Slurm answers `srun` (`.ci/slurm-up`).
fn slurm() -> bool {
    static UP: OnceLock<bool> = OnceLock::new();
    let up = *UP.get_or_init(|| answers("srun", &["-n1", "true"], 60));
    needs(up, "a running Slurm (.ci/slurm-up, as root)")
}

/// Runs `ring.c` on 4 ranks with `launcher` (program and arguments before the program) and
/// `env`; with `pmix`, a build without the feature must refuse instead.
fn ring_under(launcher: &[&str], env: &[(&str, &str)], pmix: bool) {
    let prog = compile("ring", false);
    let mut c = Command::new(launcher[0]);
    c.args(&launcher[1..]).arg(&prog);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = run_with_limit(c, Duration::from_secs(120));
    if pmix && !cfg!(feature = "pmix") {
        let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && text.contains("without the `pmix` feature"), "{}", show(&o));
        return;
    }
    assert_all_ok(&o, "ring", 4);
}

#[test]
fn ring_under_nemesis_run_pmi2() {
    let s = setup();
    let launcher = s.launcher.display().to_string();
    ring_under(&[&launcher, "-n", "4", "--"], &[("NEMESIS_PMI", "2")], false);
}

#[test]
fn ring_under_hydra_pmi2() {
    if needs(answers("mpiexec.hydra", &["--version"], 20), "mpiexec.hydra (apt-get install mpich)") {
        ring_under(&["mpiexec.hydra", "-n", "4"], &[("NEMESIS_PMI", "2")], false);
    }
}

#[test]
fn ring_under_srun_pmi2() {
    if slurm() {
        ring_under(&["srun", "-n", "4", "--overcommit", "--mpi=pmi2", "--quiet"], &[], false);
    }
}

#[test]
fn ring_under_srun_pmix() {
    if !slurm() {
        return;
    }
    let list = Command::new("srun").arg("--mpi=list").output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned() + &String::from_utf8_lossy(&list.stderr);
    if !list.lines().any(|l| l.trim().starts_with("pmix")) {
        eprintln!("SKIPPED: this Slurm has no pmix plugin");
        return;
    }
    ring_under(&["srun", "-n", "4", "--overcommit", "--mpi=pmix", "--quiet"], &[], true);
}

#[test]
fn ring_under_openmpi() {
    if needs(answers("mpiexec.openmpi", &["--version"], 20), "mpiexec.openmpi (apt-get install openmpi-bin)") {
        ring_under(&["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", "4"], &[], true);
    }
}

#[test]
fn nemesis_log_from_a_c_program() {
    let o = job(2, &compile("ring", false), &[], &[("NEMESIS_LOG", "debug")]);
    assert_all_ok(&o, "ring", 2);
    let err = String::from_utf8_lossy(&o.stderr);
    // The Endpoint's events, whichever of its modules logs them (`nemesis::endpoint::*` targets).
    let ready =
        err.lines().filter(|l| l.contains("DEBUG nemesis::endpoint") && l.contains(": endpoint ready ")).count();
    assert_eq!(ready, 2, "{}", show(&o));
    assert!(!err.contains('\x1b'), "colour codes: {}", show(&o));
}

#[test]
fn pretend_nodes_listen_on_loopback() {
    // `nemesis-run --nodes 2` on one host: the netmod listens (and beats) on 127.0.0.1 only,
    // unless NEMESIS_TCP_ADDR or NEMESIS_TCP_IF say otherwise.
    let o = job(2, &compile("ring", false), &["--nodes", "2"], &[("NEMESIS_LOG", "debug")]);
    assert_all_ok(&o, "ring", 2);
    let err = String::from_utf8_lossy(&o.stderr);
    let cards: Vec<&str> = err.lines().filter(|l| l.contains("netmod listening")).collect();
    assert_eq!(cards.len(), 2, "{}", show(&o));
    assert!(cards.iter().all(|l| l.contains("card=tcp:127.0.0.1:")), "{cards:#?}");
}

// ---- Datatypes and predefined reductions (issue 32, package E) ----

/// Runs the MPICH-built `name` under MPICH's own `mpiexec.mpich` and library at `n` ranks: the
/// programs compare with expected values, so they must pass there too. Skips without MPICH.
fn passes_under_mpich(name: &str, n: u32) {
    if !have_mpich_cc(name) || !answers("mpiexec.mpich", &["--version"], 20) {
        return;
    }
    let prog = compile_with(name, Cc::Mpich);
    let mut c = Command::new("mpiexec.mpich");
    c.args(["-n", &n.to_string()]).arg(&prog).env_remove("LD_LIBRARY_PATH");
    assert_all_ok(&run_with_limit(c, Duration::from_secs(120)), name, n);
}

#[test]
fn predefined_reductions_on_every_type() {
    run_ok("op_predefined", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("op_predefined", &[5], &["--nodes", "2"], &[]);
    // The same binary, built by MPICH's mpicc, on nemesis and on MPICH.
    if have_mpich_cc("op_predefined") {
        let o = job(3, &compile_with("op_predefined", Cc::Mpich), &["--mpich-abi"], &[]);
        assert_all_ok(&o, "op_predefined", 3);
    }
    passes_under_mpich("op_predefined", 3);
}

#[test]
fn struct_types_with_no_data() {
    run_ok("type_empty", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("type_empty", &[5], &["--nodes", "2"], &[]);
    if have_mpich_cc("type_empty") {
        assert_all_ok(&job(3, &compile_with("type_empty", Cc::Mpich), &["--mpich-abi"], &[]), "type_empty", 3);
    }
    passes_under_mpich("type_empty", 3);
}

#[test]
fn distributed_array_types() {
    run_ok("type_darray", &[1, 2, 3, 4, 6, 8], &[], &[]);
    run_ok("type_darray", &[5], &["--nodes", "2"], &[]);
    if have_mpich_cc("type_darray") {
        assert_all_ok(&job(4, &compile_with("type_darray", Cc::Mpich), &["--mpich-abi"], &[]), "type_darray", 4);
    }
    passes_under_mpich("type_darray", 4);
}

#[test]
fn large_count_datatype_calls() {
    run_ok("type_large", &[1, 2, 3, 8], &[], &[]);
    run_ok("type_large", &[4], &["--nodes", "2"], &[]);
    if have_mpich_cc("type_large") {
        assert_all_ok(&job(3, &compile_with("type_large", Cc::Mpich), &["--mpich-abi"], &[]), "type_large", 3);
    }
    passes_under_mpich("type_large", 3);
}

#[test]
fn external32_packing() {
    run_ok("type_external", &[1, 2, 3, 8], &[], &[]);
    run_ok("type_external", &[2], &["--nodes", "2"], &[]);
    if have_mpich_cc("type_external") {
        assert_all_ok(&job(2, &compile_with("type_external", Cc::Mpich), &["--mpich-abi"], &[]), "type_external", 2);
    }
    passes_under_mpich("type_external", 2);
}

#[test]
fn type_free_while_in_use() {
    run_ok("type_free_in_use", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("type_free_in_use", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn type_and_op_free_before_a_persistent_collective_starts() {
    run_ok("type_free_in_use", &[2, 3], &[], &[("PERSISTENT_COLL", "1")]);
}

#[test]
fn removed_mpi1_datatype_calls() {
    run_ok("type_legacy", &[1, 2, 3, 8], &[], &[]);
    run_ok("type_legacy", &[2], &["--nodes", "2"], &[]);
}

#[test]
fn types_by_parameters() {
    run_ok("type_named", &[1, 2, 3, 8], &[], &[]);
    run_ok("type_named", &[2], &["--nodes", "2"], &[]);
    if have_mpich_cc("type_named") {
        assert_all_ok(&job(2, &compile_with("type_named", Cc::Mpich), &["--mpich-abi"], &[]), "type_named", 2);
    }
    passes_under_mpich("type_named", 2);
}

// ---------------------------------------------------------------------------------------------
// Collectives of issue 32 (persistent, large-count, idup fixes).

#[test]
fn idup_beside_other_creations_and_collectives() {
    run_ok("coll_idup", &[1, 2, 3, 4, 5, 6, 7, 8], &[], &[]);
    run_ok("coll_idup", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn persistent_collectives() {
    run_ok("coll_persistent", &[1, 2, 3, 4, 5, 6, 7, 8], &[], &[]);
    run_ok("coll_persistent", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn large_count_collectives() {
    run_ok("coll_large", &[1, 2, 3, 4, 5, 6, 7, 8], &[], &[]);
    run_ok("coll_large", &[5], &["--nodes", "2"], &[]);
    // A count above INT_MAX: 2^31 + 64 bytes broadcast (about 40 s in a debug build, alone: a
    // longer limit than `job`'s).
    let mut c = Command::new(&setup().launcher);
    c.args(["-n", "2", "--"]).arg(compile("coll_large", false)).env("COLL_LARGE_BIG", "1");
    c.env_remove("LD_LIBRARY_PATH");
    let o = run_with_limit(c, Duration::from_secs(900));
    assert_all_ok(&o, "coll_large", 2);
}

// ---- Dynamic processes (spawn, ports, join, names) ------------------------------------------

/// Asserts every child `0..n` printed `CHILD <name> <rank>` once.
fn assert_children(o: &std::process::Output, name: &str, n: u32) {
    let text = String::from_utf8_lossy(&o.stdout);
    for r in 0..n {
        let line = format!("CHILD {name} {r}");
        let k = text.lines().filter(|l| l.trim() == line).count();
        assert_eq!(k, 1, "{name}: `{line}` printed {k} times: {}", show(o));
    }
}

#[test]
fn spawn_parents_and_children() {
    let prog = compile("spawn_basic", false);
    // (parents, children, root, launcher options)
    for (n, kids, root, args) in [
        (1, 1, 0, &[][..]),
        (1, 3, 0, &[][..]),
        (2, 2, 1, &[][..]),
        (3, 2, 0, &[][..]),
        (2, 3, 0, &["--nodes", "2"][..]),
        (4, 4, 3, &["--nodes", "2"][..]),
    ] {
        let universe = (n + kids).to_string();
        let mut a = vec!["--universe-size", &universe];
        a.extend_from_slice(args);
        let (kids_s, root_s) = (kids.to_string(), root.to_string());
        let o = job(n, &prog, &a, &[("SPAWN_CHILDREN", &kids_s), ("SPAWN_ROOT", &root_s)]);
        assert_all_ok(&o, "spawn_basic", n);
        assert_children(&o, "spawn_basic", kids);
    }
    // Spawns one after the other take new slots; the universe is far larger than the job.
    let o = job(2, &prog, &["--universe-size", "64"], &[("SPAWN_ROUNDS", "5")]);
    assert_all_ok(&o, "spawn_basic", 2);
    let text = String::from_utf8_lossy(&o.stdout);
    for r in 0..2 {
        let k = text.lines().filter(|l| l.trim() == format!("CHILD spawn_basic {r}")).count();
        assert_eq!(k, 5, "child {r} of 5 rounds printed {k} times: {}", show(&o));
    }
    // `--tag-output`: the children's lines carry their ranks in the universe.
    let o = job(2, &prog, &["--universe-size", "4", "--tag-output"], &[]);
    let text = String::from_utf8_lossy(&o.stdout);
    for line in ["[0] OK spawn_basic 0", "[1] OK spawn_basic 1", "[2] CHILD spawn_basic 0", "[3] CHILD spawn_basic 1"] {
        assert!(o.status.success() && text.lines().any(|l| l.trim() == line), "`{line}` missing: {}", show(&o));
    }
    // PMI-2: the spawn request as `cmd=spawn`.
    let o = job(2, &prog, &["--universe-size", "4"], &[("NEMESIS_PMI", "2")]);
    assert_all_ok(&o, "spawn_basic", 2);
    assert_children(&o, "spawn_basic", 2);
}

#[test]
fn spawn_multiple_commands() {
    let prog = compile("spawn_multiple", false);
    for n in [1, 2] {
        let universe = (n + 3).to_string();
        let o = job(n, &prog, &["--universe-size", &universe], &[]);
        assert_all_ok(&o, "spawn_multiple", n);
        assert_children(&o, "spawn_multiple", 3);
    }
}

#[test]
fn spawn_refused_with_the_reason() {
    let prog = compile("spawn_errors", false);
    // No room in the universe; room, with a program that does not exist.
    run_ok("spawn_errors", &[1, 2], &[], &[("SPAWN_EXPECT", "full")]);
    run_ok("spawn_errors", &[2], &["--universe-size", "3"], &[("SPAWN_EXPECT", "room")]);
    // The default handler ends the job with the reason.
    let o = job(2, &prog, &[], &[("SPAWN_EXPECT", "full"), ("SPAWN_FATAL", "1")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("MPI_ERR_SPAWN") && err.contains("--universe-size"), "{}", show(&o));
    // A singleton: no process manager at all.
    let mut c = Command::new(&prog);
    c.env_remove("LD_LIBRARY_PATH").env("SPAWN_EXPECT", "singleton");
    let o = run_with_limit(c, Duration::from_secs(60));
    assert_all_ok(&o, "spawn_errors", 1);
    let mut c = Command::new(&prog);
    c.env_remove("LD_LIBRARY_PATH").env("SPAWN_EXPECT", "singleton").env("SPAWN_FATAL", "1");
    let o = run_with_limit(c, Duration::from_secs(60));
    assert!(String::from_utf8_lossy(&o.stderr).contains("singleton"), "{}", show(&o));
    // Another process manager (Hydra's PMI-1 and PMI-2).
    if needs(answers("mpiexec.hydra", &["--version"], 20), "mpiexec.hydra (apt-get install mpich)") {
        for pmi in ["1", "2"] {
            let mut c = Command::new("mpiexec.hydra");
            c.args(["-n", "2"]).arg(&prog).env("SPAWN_EXPECT", "foreign").env("NEMESIS_PMI", pmi);
            assert_all_ok(&run_with_limit(c, Duration::from_secs(120)), "spawn_errors", 2);
        }
        let mut c = Command::new("mpiexec.hydra");
        c.args(["-n", "1"]).arg(&prog).env("SPAWN_EXPECT", "foreign").env("SPAWN_FATAL", "1");
        let o = run_with_limit(c, Duration::from_secs(120));
        assert!(String::from_utf8_lossy(&o.stderr).contains("Hydra"), "{}", show(&o));
    }
}

#[test]
fn ports_between_halves_of_a_job() {
    run_ok("dynproc_ports", &[1, 2, 3, 5], &[], &[]);
    run_ok("dynproc_ports", &[4, 8], &["--nodes", "2"], &[]);
}

#[test]
fn join_over_a_socket() {
    run_ok("dynproc_join", &[1, 2, 3, 4], &[], &[]);
    run_ok("dynproc_join", &[2, 8], &["--nodes", "2"], &[]);
}

// ---------------------------------------------------------------------------------------------
// Issue 32, point-to-point and requests (helper C).

/// `p2p_large.c`: 2^31 + 64 `MPI_BYTE`s, then as many elements of a derived 1-byte type, from rank
/// 0 to rank 1 (`Send_c`/`Recv_c`, `Isend_c`/`Irecv_c`; `MPI_Get_count` is `MPI_UNDEFINED`,
/// `MPI_Get_count_c` the count), one node and 2 nodes; every other `_c` form with small counts in
/// a ring at 1, 3 and 8 ranks; bad counts, types, ranks, tags.
#[test]
fn p2p_large_counts() {
    run_ok("p2p_large", &[1, 2, 3, 8], &[], &[]);
    run_ok("p2p_large", &[2], &["--nodes", "2"], &[]);
}

/// `p2p_requests.c`: `Isendrecv(_replace)` and their `_c` forms (a strided type, past the eager
/// size, `PROC_NULL`), `Request_get_status_all/any/some`, the status accessors, generalized
/// requests (query, free and cancel callbacks; one calling MPI; a failing query), the MPI-4.1
/// buffer calls (a communicator's own buffer, flush, iflush, `MPI_BUFFER_AUTOMATIC`); bad input.
#[test]
fn p2p_requests() {
    run_ok("p2p_requests", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("p2p_requests", &[5], &["--nodes", "2"], &[]);
    // MPI_THREAD_MULTIPLE: generalized requests completed by another thread during the wait.
    run_ok("p2p_requests", &[1, 2], &[], &[("P2P_THREADS", "1")]);
}

/// `p2p_partitioned.c`: partitioned sends and receives in a ring (8 partitions sent, 4 received),
/// 4 activations, partitions marked ready in reverse, by range, by list and from 4 threads,
/// `Parrived` per partition; a strided type; `PROC_NULL`; a size mismatch (`MPI_ERR_TRUNCATE`);
/// bad input.
#[test]
fn p2p_partitioned() {
    run_ok("p2p_partitioned", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("p2p_partitioned", &[2, 3], &[], &[("P2P_SINGLE", "1")]);
    run_ok("p2p_partitioned", &[5], &["--nodes", "2"], &[]);
}

// ---------------------------------------------------------------------------------------------
// Environment, sessions, info, errors, tools, topology mapping (issue 32).

#[test]
fn sessions() {
    for mode in ["only", "world-first", "session-first"] {
        let env = [("SESSION_MODE", mode)];
        run_ok("session_models", &[1, 2, 3, 4, 8], &[], &env);
        run_ok("session_models", &[5], &["--nodes", "2"], &env);
    }
    // A universe larger than the job (room for spawns): mpi://WORLD is this process's world.
    run_ok("session_models", &[2], &["--universe-size", "6"], &[("SESSION_MODE", "only")]);
}

#[test]
fn session_buffer() {
    run_ok("session_buffer", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("session_buffer", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn environment_calls() {
    run_ok("env_calls", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("env_calls", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn info_calls() {
    run_ok("info_calls", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("info_calls", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn persistent_collectives_in_place() {
    run_ok("coll_persistent_inplace", &[1, 2, 3, 5], &[], &[]);
    run_ok("coll_persistent_inplace", &[4], &["--nodes", "2"], &[]);
}

/// `spawn_self.c`: every rank spawns two children on `MPI_COMM_SELF` at once, three rounds (the
/// launcher serves several spawns while children of another are still starting).
#[test]
fn spawns_from_every_rank_at_once() {
    run_ok("spawn_self", &[2, 3, 4], &["--universe-size", "40"], &[]);
}

#[test]
fn error_handlers_of_every_kind() {
    run_ok("errh_objects", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("errh_objects", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn communicators_keep_their_lineage() {
    run_ok("comm_lineage", &[1, 2, 3, 4, 8], &[], &[]);
    run_ok("comm_lineage", &[5], &["--nodes", "2"], &[]);
}

#[test]
fn intercommunicator_nonblocking_and_persistent_collectives() {
    // Groups of 1 and n-1, halves, n-1 and 1; the ranks past two cores wait by yielding.
    run_ok("inter_nbc", &[2, 3, 4], &[], &[]);
    run_ok("inter_nbc", &[5, 8], &["--wait", "yield"], &[]);
    run_ok("inter_nbc", &[5], &["--nodes", "2", "--wait", "yield"], &[]);
}

#[test]
fn intercommunicator_roots_arguments_by_role() {
    // Groups of 1 and n-1, halves, n-1 and 1; the ranks past two cores wait by yielding.
    run_ok("inter_roles", &[2, 3, 4], &[], &[]);
    run_ok("inter_roles", &[5], &["--wait", "yield"], &[]);
    run_ok("inter_roles", &[5], &["--nodes", "2", "--wait", "yield"], &[]);
}

// ---------------------------------------------------------------------------------------------
// Issue 34, one-sided communication (helper T). Over two nodes the targets on the other node go
// through the remote path (active messages on the window's context).

/// Runs a one-sided program at 1-4 ranks, at 8 with the yielding wait, and at `nodes2` ranks over
/// two nodes (with the `rdma` feature also over OFI when `ofi`).
fn one_sided(prog: &str, nodes2: u32, ofi: bool) {
    run_ok(prog, &[1, 2, 3, 4], &[], &[]);
    run_ok(prog, &[8], &["--wait", "yield"], &[]);
    run_ok(prog, &[nodes2], &["--nodes", "2"], &[]);
    if ofi && cfg!(feature = "rdma") {
        for prov in ["tcp;ofi_rxm", "shm"] {
            let env = [("NEMESIS_OFI_PROVIDER", prov), ("NEMESIS_OFI_HEARTBEAT_ADDR", "127.0.0.1")];
            run_ok(prog, &[nodes2], &["--nodes", "2", "--netmod", "ofi"], &env);
        }
    }
}

#[test]
fn one_sided_windows() {
    one_sided("win_create", 5, false);
}

#[test]
fn one_sided_on_alloc_mem() {
    one_sided("win_allocmem", 4, false);
}

#[test]
fn one_sided_operations() {
    one_sided("win_ops", 4, true);
}

#[test]
fn one_sided_synchronisation() {
    one_sided("win_sync", 5, false);
}

#[test]
fn one_sided_atomics_under_contention() {
    one_sided("win_atomic", 4, true);
}

#[test]
fn one_sided_lock_fairness_and_progress() {
    one_sided("win_fairness", 4, false);
}

/// `win_robust.c` (`--keep-going`): the last rank dies holding the exclusive lock of rank 0's
/// window, or (a retried race) inside an accumulate under its mutex; every survivor's lock or
/// accumulate fails with `MPIX_ERR_PROC_FAILED` within seconds, a remote origin's lock request
/// too. Without the dead-holder checks they wait forever (the job's time limit fails the test).
/// Then the reply-size limit of the remote path.
#[test]
fn one_sided_a_dead_holder_fails_its_waiters() {
    let prog = compile("win_robust", false);
    for (case, n) in [("lock", 2u32), ("lock", 3), ("acc", 2), ("acc", 3)] {
        for attempt in 1.. {
            let o = {
                let mut c = Command::new(&setup().launcher);
                c.arg("-n").arg(n.to_string()).args(["--keep-going", "--"]).arg(&prog).arg(case);
                c.env_remove("LD_LIBRARY_PATH");
                run_with_limit(c, Duration::from_secs(60))
            };
            let text = String::from_utf8_lossy(&o.stdout);
            if case == "acc" && text.contains("MISSED") && attempt < 5 {
                continue;
            }
            for r in 0..n - 1 {
                let ok = format!("OK win_robust {r} (");
                assert!(text.lines().any(|l| l.trim().starts_with(&ok)), "{case}, rank {r} of {n}: {}", show(&o));
            }
            break;
        }
    }
    // A remote origin's lock request at a target whose node-local holder died: answered.
    let o = {
        let mut c = Command::new(&setup().launcher);
        c.args(["-n", "4", "--nodes", "2", "--keep-going", "--"]).arg(&prog).arg("rlock");
        c.env_remove("LD_LIBRARY_PATH");
        run_with_limit(c, Duration::from_secs(60))
    };
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().filter(|l| l.trim().starts_with("OK win_robust ")).count(), 3, "rlock: {}", show(&o));
    // The reply-size limit: refused over two nodes, moved on one.
    run_ok_with("win_robust", &[2], &["--nodes", "2"], &["size"]);
    run_ok_with("win_robust", &[2], &[], &["size"]);
}

/// [`run_ok`] with program arguments `args`.
fn run_ok_with(name: &str, ranks: &[u32], launcher_args: &[&str], args: &[&str]) {
    let prog = compile(name, false);
    for &n in ranks {
        let mut c = Command::new(&setup().launcher);
        c.arg("-n").arg(n.to_string()).args(launcher_args).arg("--").arg(&prog).args(args);
        c.env_remove("LD_LIBRARY_PATH");
        let o = run_with_limit(c, Duration::from_secs(120));
        let text = String::from_utf8_lossy(&o.stdout);
        for r in 0..n {
            let ok = format!("OK {name} {r} ");
            assert!(o.status.success() && text.lines().any(|l| l.trim().starts_with(&ok)), "rank {r}: {}", show(&o));
        }
    }
}

#[test]
fn one_sided_errors() {
    one_sided("win_errors", 4, false);
}
