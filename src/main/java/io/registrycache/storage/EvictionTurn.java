package io.registrycache.storage;

import java.util.Optional;

/**
 * Which replica evicts and prunes: on a store only this process writes, this one; on a bucket
 * shared by replicas, one of them (the owner of the key {@value #KEY} under the cluster's
 * rendezvous hashing), so the budget is the bucket's and one LRU decides (issue 24). A bean of this
 * type is optional: without one, every replica evicts its own store.
 */
@FunctionalInterface
public interface EvictionTurn {

  /** The key whose owner evicts, hashed as blob digests are. */
  String KEY = "janitor";

  /** This replica evicts. */
  EvictionTurn HERE = Optional::empty;

  /**
   * The replica that evicts and prunes when it is another one (its address, for logs and errors);
   * empty when it is this one.
   */
  Optional<String> elsewhere();
}
