package io.registrycache.testsupport;

import java.lang.instrument.Instrumentation;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import net.bytebuddy.agent.ByteBuddyAgent;
import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.agent.builder.ResettableClassFileTransformer;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.matcher.ElementMatchers;

/**
 * Which of the service's source files a piece of work enters: every method and constructor of the
 * main classes ({@code io.registrycache.*}, not tests or test support) is given an entry hook (Byte
 * Buddy advice, retransformed into the running JVM); while recording, each entry notes its file
 * ({@code proxy/ProxyBlobService} for {@code ProxyBlobService$Lookup}, a lambda body or a Spring
 * proxy of it), in the order first entered. For checking that docs/architecture.md lists a hot path
 * as the code runs it.
 */
public final class ClassesEntered implements AutoCloseable {

  private static final Map<String, Long> ENTERED = new ConcurrentHashMap<>();
  private static final AtomicLong ORDER = new AtomicLong();
  private static volatile boolean recording;

  private final Instrumentation instrumentation;
  private final ResettableClassFileTransformer transformer;

  private ClassesEntered(
      Instrumentation instrumentation, ResettableClassFileTransformer transformer) {
    this.instrumentation = instrumentation;
    this.transformer = transformer;
  }

  /** Hooks every main class, loaded or not; {@link #close} takes the hooks out again. */
  public static ClassesEntered install() {
    Instrumentation instrumentation = ByteBuddyAgent.install();
    ResettableClassFileTransformer transformer =
        new AgentBuilder.Default()
            .disableClassFormatChanges()
            .with(AgentBuilder.RedefinitionStrategy.RETRANSFORMATION)
            .with(AgentBuilder.TypeStrategy.Default.REDEFINE)
            .ignore(ElementMatchers.not(ElementMatchers.nameStartsWith("io.registrycache.")))
            .type(
                ElementMatchers.nameStartsWith("io.registrycache.")
                    .and(
                        ElementMatchers.not(
                            ElementMatchers.nameStartsWith("io.registrycache.testsupport.")))
                    .and(
                        ElementMatchers.not(ElementMatchers.nameStartsWith("io.registrycache.it.")))
                    .and(ElementMatchers.not(ElementMatchers.nameMatches(".*(Test|IT)(\\$.*)?")))
                    .and(
                        ElementMatchers.not(
                            ElementMatchers.isInterface().and(ElementMatchers.isAnnotation()))))
            .transform(
                (builder, type, loader, module, domain) ->
                    builder.visit(
                        Advice.to(Entry.class)
                            .on(
                                ElementMatchers.isMethod()
                                    .and(ElementMatchers.not(ElementMatchers.isAbstract()))
                                    .or(ElementMatchers.isConstructor()))))
            .installOn(instrumentation);
    return new ClassesEntered(instrumentation, transformer);
  }

  /** Forgets what was recorded and records from now on. */
  public void start() {
    ENTERED.clear();
    recording = true;
  }

  /** Stops recording; the source files entered since {@link #start}, in the order first entered. */
  public List<String> stop() {
    recording = false;
    List<Map.Entry<String, Long>> entries = new ArrayList<>(ENTERED.entrySet());
    entries.sort(Comparator.comparingLong(Map.Entry::getValue));
    return entries.stream().map(Map.Entry::getKey).toList();
  }

  /** Called by the hooks: {@code type} is the binary name of the class whose code is entered. */
  public static void entered(String type) {
    if (!recording) {
      return;
    }
    ENTERED.computeIfAbsent(file(type), k -> ORDER.incrementAndGet());
  }

  /** {@code io.registrycache.storage.s3.S3Objects$Upload} as {@code s3/S3Objects}. */
  static String file(String type) {
    String topLevel = type.contains("$") ? type.substring(0, type.indexOf('$')) : type;
    String[] parts = topLevel.split("\\.");
    return parts.length < 2 ? topLevel : parts[parts.length - 2] + "/" + parts[parts.length - 1];
  }

  @Override
  public void close() {
    recording = false;
    transformer.reset(instrumentation, AgentBuilder.RedefinitionStrategy.RETRANSFORMATION);
  }

  /** The entry hook, inlined into every hooked method. */
  public static final class Entry {
    private Entry() {}

    @Advice.OnMethodEnter
    static void enter(@Advice.Origin("#t") String type) {
      ClassesEntered.entered(type);
    }
  }
}
