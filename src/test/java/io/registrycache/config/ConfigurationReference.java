package io.registrycache.config;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import tools.jackson.databind.JsonNode;

/**
 * Renders docs/configuration.md, the configuration reference, from Spring Boot's configuration
 * metadata ({@code target/classes/META-INF/spring-configuration-metadata.json}): the processor's
 * output from the properties' Javadoc, merged with {@code
 * additional-spring-configuration-metadata.json}, which names the settings of map and list values
 * ({@code upstreams.*.url}, {@code auth.rules[*].subjects}). One table per section ({@code
 * registry-cache.<section>}), properties in name order.
 */
final class ConfigurationReference {

  static final String COMMAND =
      "./mvnw test -Dtest=ConfigurationReferenceTest -Dconfiguration-reference.write=true";

  private static final Pattern CODE = Pattern.compile("\\{@(?:code|link)\\s+([^}]*)}");
  private static final Pattern PACKAGE = Pattern.compile("\\b[a-z][a-z0-9_]*\\.(?=[a-zA-Z])");

  private ConfigurationReference() {}

  private static final String HEADER =
      """
      # Configuration reference

      Every `registry-cache.*` setting (and the admin endpoint's own), with its type, default and
      meaning. Generated from Spring Boot's configuration metadata, which the build makes from the
      properties' Javadoc and \
      `src/main/resources/META-INF/additional-spring-configuration-metadata.json`;
      do not edit by hand: `ConfigurationReferenceTest` fails when this file differs, and
      `%s` writes it again.

      `*` stands for an upstream's key, `[*]` for an index in a list (`rules[0].subjects`). Every
      setting can also be given as an environment variable, and Spring Boot's own settings
      (`server.port`, `management.*`) are in the [configuration guide](configuration-guide.md).
      """;

  /** The reference as Markdown, from the metadata's {@code properties} array. */
  static String render(JsonNode metadata) {
    Map<String, List<JsonNode>> sections = new TreeMap<>();
    for (JsonNode property : metadata.path("properties")) {
      String section = section(property.path("name").asString());
      sections.computeIfAbsent(section, k -> new ArrayList<>()).add(property);
    }
    StringBuilder out = new StringBuilder(HEADER.formatted(COMMAND));
    for (Map.Entry<String, List<JsonNode>> section : sections.entrySet()) {
      out.append("\n## `")
          .append(section.getKey())
          .append("`\n\n")
          .append("| property | type | default | description |\n|---|---|---|---|\n");
      section.getValue().stream()
          .sorted(Comparator.comparing(p -> p.path("name").asString()))
          .forEach(
              p ->
                  out.append("| `")
                      .append(p.path("name").asString())
                      .append("` | ")
                      .append(cell(type(p.path("type").asString()), true))
                      .append(" | ")
                      .append(cell(defaultValue(p.path("defaultValue")), true))
                      .append(" | ")
                      .append(cell(description(p.path("description").asString()), false))
                      .append(" |\n"));
    }
    return out.toString();
  }

  /**
   * {@code registry-cache.upstreams.*.url} → {@code registry-cache.upstreams}, top-level keys →
   * {@code registry-cache}; other names by their first three parts ({@code
   * management.endpoint.cache}).
   */
  static String section(String name) {
    String[] parts = name.split("\\.");
    if (name.startsWith("registry-cache.")) {
      return parts.length > 2 ? parts[0] + "." + parts[1].replaceAll("\\[.*", "") : parts[0];
    }
    return String.join(".", Arrays.copyOf(parts, Math.min(3, parts.length - 1)));
  }

  /** {@code java.util.List<java.lang.String>} → {@code List<String>}; nested: {@code A.B}. */
  static String type(String type) {
    return PACKAGE.matcher(type).replaceAll("").replace('$', '.');
  }

  private static String defaultValue(JsonNode value) {
    if (value.isMissingNode() || value.isNull()) {
      return "";
    }
    if (value.isArray()) {
      List<String> items = new ArrayList<>();
      value.forEach(v -> items.add(v.asString()));
      return items.isEmpty() ? "[]" : String.join(",", items);
    }
    return value.asString();
  }

  /** Javadoc's {@code {@code x}} and {@code {@link X}} as Markdown code. */
  static String description(String javadoc) {
    Matcher m = CODE.matcher(javadoc);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      m.appendReplacement(out, Matcher.quoteReplacement("`" + m.group(1).trim() + "`"));
    }
    m.appendTail(out);
    return out.toString();
  }

  private static String cell(String text, boolean code) {
    String escaped = text.replace("|", "\\|").replace("\n", " ");
    return code && !escaped.isEmpty() ? "`" + escaped + "`" : escaped;
  }
}
