package io.registrycache.auth;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.springframework.security.crypto.bcrypt.BCryptPasswordEncoder;

class HtpasswdTest {

  /** Written by {@code htpasswd -nbB -C 4 alice s3cret} (Apache 2.4). */
  static final String ALICE = "alice:$2y$04$65MOs5hT7ExjE52q8gkgY.XtlpezsUaXt/sH0bwrWoEtECzdsMOuW";

  @Test
  void readsBcryptEntriesOfApacheHtpasswd() {
    Htpasswd file =
        Htpasswd.parse(
            "# users\n\n" + ALICE + "\r\nbob:" + new BCryptPasswordEncoder(4).encode("x") + "\n");
    assertThat(file.hashes()).containsOnlyKeys("alice", "bob");
    assertThat(new BCryptPasswordEncoder().matches("s3cret", file.hashes().get("alice"))).isTrue();
    assertThat(new BCryptPasswordEncoder().matches("S3cret", file.hashes().get("alice"))).isFalse();
  }

  @Test
  void refusesOtherSchemesNamingLineAndUserButNotTheHash() {
    assertThatThrownBy(
            () -> Htpasswd.parse(ALICE + "\nbob:$apr1$7HhHvxKU$Js4bmVTHYGoMtyrLLrUJm0\n"))
        .hasMessageContaining("line 2")
        .hasMessageContaining("'bob'")
        .hasMessageContaining("MD5")
        .hasMessageContaining("htpasswd -B")
        .hasMessageNotContaining("Js4bmV");
    assertThatThrownBy(() -> Htpasswd.parse("carol:{SHA}GpHWL3ymc5liWkNopqtdSjuqYHM="))
        .hasMessageContaining("SHA-1");
    assertThatThrownBy(() -> Htpasswd.parse("dave:plaintext")).hasMessageContaining("plain-text");
    assertThatThrownBy(() -> Htpasswd.parse("erin:$2y$04$short"))
        .hasMessageContaining("malformed bcrypt");
  }

  @Test
  void refusesLinesWithoutNameAndDuplicates() {
    assertThatThrownBy(() -> Htpasswd.parse("no colon here")).hasMessageContaining("line 1");
    assertThatThrownBy(
            () -> Htpasswd.parse(":$2y$04$65MOs5hT7ExjE52q8gkgY.XtlpezsUaXt/sH0bwrWoEtECzdsMOuW"))
        .hasMessageContaining("line 1");
    assertThatThrownBy(() -> Htpasswd.parse(ALICE + "\n" + ALICE))
        .hasMessageContaining("given twice");
  }
}
