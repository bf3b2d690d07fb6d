package io.registrycache.config;

/**
 * Where stored content may be served by digest ({@code registry-cache.storage.content-scope});
 * bytes are stored once whatever the scope. See docs/security.md, "Content across trust
 * boundaries".
 */
public enum ContentScope {
  /** Only in a repository (of an upstream) the content was fetched for or confirmed in. */
  REPOSITORY,
  /** In any repository of an upstream the content was fetched from. */
  UPSTREAM,
  /** Anywhere: cross-upstream dedupe, no boundary. */
  SHARED
}
