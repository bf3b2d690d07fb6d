package io.registrycache.oci;

import tools.jackson.databind.json.JsonMapper;

/** The one Jackson mapper of the cache's own code: thread-safe once built, and costly to build. */
public final class Json {

  /** Jackson with its defaults. */
  public static final JsonMapper MAPPER = JsonMapper.builder().build();

  private Json() {}
}
