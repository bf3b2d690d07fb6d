package io.registrycache.oci;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.regex.Pattern;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * The hand-written grammars accept exactly what the specs' regular expressions accept (the
 * expressions live here only, as the oracle), over strings built from the characters and
 * separators that matter, so that near-valid input is common.
 */
class GrammarTest {

  private static final Pattern COMPONENT = Pattern.compile("[a-z0-9]+(?:(?:\\.|_|__|-+)[a-z0-9]+)*");
  private static final Pattern TAG = Pattern.compile("[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}");
  private static final Pattern DIGEST = Pattern.compile("[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+");
  private static final Pattern HEX = Pattern.compile("[a-f0-9]+");

  @Provide
  Arbitrary<String> nearValid() {
    Arbitrary<String> tokens = Arbitraries.of(
        "a", "z", "0", "9", "ab", "Q", "F", "f", "e3", ".", "..", "_", "__", "___", "-", "--", "+", ":", "=", "/",
        " ", "\n", "é", "sha256", "sha512");
    return Arbitraries.oneOf(
        tokens.list().ofMaxSize(12).map(l -> String.join("", l)),
        Arbitraries.strings().withChars("az09AZ._-+:=/").ofMaxLength(140));
  }

  @Property(tries = 3000)
  void nameComponentsAsTheSpecExpression(@ForAll("nearValid") String value) {
    assertThat(Grammar.nameComponent(value, 0, value.length())).isEqualTo(COMPONENT.matcher(value).matches());
  }

  @Property(tries = 3000)
  void tagsAsTheSpecExpression(@ForAll("nearValid") String value) {
    assertThat(Grammar.tag(value)).isEqualTo(TAG.matcher(value).matches());
  }

  @Property(tries = 500)
  void tagsAroundTheLengthLimit(@ForAll("longTags") String value) {
    assertThat(Grammar.tag(value)).isEqualTo(TAG.matcher(value).matches());
  }

  @Provide
  Arbitrary<String> longTags() {
    return Arbitraries.strings().withChars("aZ0_.-").ofMinLength(125).ofMaxLength(131);
  }

  @Property(tries = 3000)
  void digestsAsTheSpecExpression(@ForAll("nearValid") String value) {
    assertThat(Grammar.digest(value)).isEqualTo(DIGEST.matcher(value).matches());
  }

  @Property(tries = 1000)
  void lowerHexAsTheExpression(@ForAll("nearValid") String value) {
    assertThat(Grammar.lowerHex(value)).isEqualTo(HEX.matcher(value).matches());
  }

  @Property(tries = 1000)
  void componentsInsideALongerString(@ForAll("nearValid") String value) {
    String framed = "x/" + value + "/y";
    assertThat(Grammar.nameComponent(framed, 2, 2 + value.length())).isEqualTo(COMPONENT.matcher(value).matches());
  }
}
