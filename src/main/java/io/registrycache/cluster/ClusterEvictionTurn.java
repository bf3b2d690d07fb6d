package io.registrycache.cluster;

import io.registrycache.config.ConditionalOnStorageType;
import io.registrycache.config.StorageProperties;
import io.registrycache.storage.EvictionTurn;
import java.util.Optional;
import org.springframework.stereotype.Component;

/**
 * On a bucket shared by the replicas ({@code storage.type=s3}), the replica that evicts and prunes
 * is the owner of {@link EvictionTurn#KEY} under the cluster's rendezvous hashing, as blobs have
 * owners: no lease object, no conditional write. Members that disagree for a moment may both run a
 * pass; the eviction's safety rules make that cost one pass's work twice. Without a cluster every
 * replica is its own evictor.
 */
@Component
@ConditionalOnCluster
@ConditionalOnStorageType(StorageProperties.Type.S3)
public class ClusterEvictionTurn implements EvictionTurn {

  private final ClusterMembership membership;

  public ClusterEvictionTurn(ClusterMembership membership) {
    this.membership = membership;
  }

  @Override
  public Optional<String> elsewhere() {
    return membership.ownerElsewhere(KEY).map(Object::toString);
  }
}
