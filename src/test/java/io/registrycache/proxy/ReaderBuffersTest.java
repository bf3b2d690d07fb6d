package io.registrycache.proxy;

import static org.assertj.core.api.Assertions.assertThat;

import io.netty.buffer.ByteBuf;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.reactivestreams.Subscription;
import org.springframework.util.unit.DataSize;
import reactor.core.publisher.BaseSubscriber;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

class ReaderBuffersTest {

  @Test
  void aReaderWaitsWhileTheBudgetIsLentAndGetsTheFirstBufferReleased() {
    ReaderBuffers buffers = new ReaderBuffers(DataSize.ofBytes(2L * ReaderBuffers.BUFFER_BYTES));
    assertThat(buffers.max()).isEqualTo(2);
    ByteBuf a = buffers.take().block(Duration.ofSeconds(1));
    ByteBuf b = buffers.take().block(Duration.ofSeconds(1));
    assertThat(buffers.lent()).isEqualTo(2);

    Mono<ByteBuf> third = buffers.take().cache();
    assertThat(third.toFuture()).as("a third buffer over a budget of two").isNotDone();
    a.writeBytes(new byte[100]);
    assertThat(a.release()).isTrue();
    ByteBuf c = third.block(Duration.ofSeconds(1));
    assertThat(c.writerIndex()).as("a buffer given back comes out empty").isZero();
    assertThat(c.writableBytes()).isEqualTo(ReaderBuffers.BUFFER_BYTES);
    assertThat(c.isDirect()).isTrue();

    b.release();
    c.release();
    assertThat(buffers.lent()).isZero();
  }

  /**
   * A reader's steps are repeated (Flux.repeat), which passes each request of its client on to the
   * step under way, and a client asks for the next buffer while it handles one (inside onNext):
   * each step must still take one buffer, and every buffer go back.
   */
  @Test
  void aClientAskingForMoreWhileHandlingABufferTakesOneBufferPerStep() {
    ReaderBuffers buffers = new ReaderBuffers(DataSize.ofMegabytes(1));
    AtomicInteger got = new AtomicInteger();
    Mono.defer(buffers::take)
        .flatMap(Mono::just)
        .repeat(9)
        .subscribe(
            new BaseSubscriber<ByteBuf>() {
              @Override
              protected void hookOnSubscribe(Subscription s) {
                request(1);
              }

              @Override
              protected void hookOnNext(ByteBuf b) {
                got.incrementAndGet();
                b.release();
                request(1);
              }
            });
    assertThat(got).hasValue(10);
    assertThat(buffers.lent()).as("buffers still lent").isZero();
  }

  @Test
  void aBufferReleasedByTheReaderItWasHandedToGoesBackToo() {
    ReaderBuffers buffers = new ReaderBuffers(DataSize.ofBytes(ReaderBuffers.BUFFER_BYTES));
    ByteBuf first = buffers.take().block(Duration.ofSeconds(1));
    List<Integer> sizes = new ArrayList<>();
    buffers
        .take()
        .subscribe(
            b -> {
              sizes.add(b.writableBytes());
              b.release();
            });
    assertThat(sizes).isEmpty();
    first.release();
    assertThat(sizes).containsExactly(ReaderBuffers.BUFFER_BYTES);
    assertThat(buffers.lent()).isZero();
  }

  /** The JVM's direct-memory limit fails the one reader with an IOException, not an Error. */
  @Test
  void noDirectMemoryIsAnIoErrorForTheReader() {
    ReaderBuffers buffers =
        new ReaderBuffers(
            DataSize.ofMegabytes(1),
            () -> {
              throw new OutOfMemoryError("Cannot reserve 65536 bytes of direct buffer memory");
            });
    StepVerifier.create(Flux.from(buffers.take()))
        .expectErrorSatisfies(
            e ->
                assertThat(e)
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("no memory for the response's buffers"))
        .verify(Duration.ofSeconds(5));
    assertThat(buffers.lent()).isZero();
  }

  @Test
  void buffersAreDirectAndOfTheSizeGiven() {
    ReaderBuffers buffers =
        new ReaderBuffers(
            DataSize.ofBytes(ReaderBuffers.BUFFER_BYTES),
            () -> ByteBuffer.allocateDirect(ReaderBuffers.BUFFER_BYTES));
    ByteBuf b = buffers.take().block(Duration.ofSeconds(1));
    assertThat(b.capacity()).isEqualTo(ReaderBuffers.BUFFER_BYTES);
    assertThat(b.maxCapacity()).isEqualTo(ReaderBuffers.BUFFER_BYTES);
    b.release();
  }

  /**
   * One reader holds at most its share, so a client that stops reading cannot take the budget from
   * the others; a buffer it gives back lets it take the next.
   */
  @Test
  void oneReaderHoldsAtMostItsShareWhileAnotherStillGetsBuffers() {
    ReaderBuffers buffers =
        new ReaderBuffers(
            DataSize.ofBytes(4L * ReaderBuffers.PER_READER * ReaderBuffers.BUFFER_BYTES));
    ReaderBuffers.Share stalled = buffers.share();
    List<ByteBuf> held = new ArrayList<>();
    for (int i = 0; i < ReaderBuffers.PER_READER; i++) {
      held.add(stalled.take().block(Duration.ofSeconds(1)));
    }
    Mono<ByteBuf> oneMore = stalled.take().cache();
    assertThat(oneMore.toFuture()).as("a buffer over the reader's share").isNotDone();
    assertThat(stalled.lent()).isEqualTo(ReaderBuffers.PER_READER);

    ReaderBuffers.Share other = buffers.share();
    ByteBuf theirs = other.take().block(Duration.ofSeconds(1));
    assertThat(theirs).as("another reader's buffer while the first is at its share").isNotNull();
    theirs.release();

    held.remove(0).release();
    ByteBuf next = oneMore.block(Duration.ofSeconds(1));
    assertThat(stalled.lent()).isEqualTo(ReaderBuffers.PER_READER);
    next.release();
    held.forEach(ByteBuf::release);
    assertThat(stalled.lent()).isZero();
    assertThat(other.lent()).isZero();
    assertThat(buffers.lent()).isZero();
  }

  /** A reader cancelled while it waits for a buffer gives its permit back. */
  @Test
  void aReaderCancelledWhileWaitingForABufferGivesItsPermitBack() {
    ReaderBuffers buffers = new ReaderBuffers(DataSize.ofBytes(ReaderBuffers.BUFFER_BYTES));
    ByteBuf only = buffers.take().block(Duration.ofSeconds(1));
    ReaderBuffers.Share reader = buffers.share();
    var waiting = reader.take().subscribe();
    assertThat(reader.lent()).as("the permit taken while the buffer is awaited").isEqualTo(1);
    waiting.dispose();
    assertThat(reader.lent()).isZero();
    only.release();
    assertThat(buffers.lent()).isZero();
  }
}
