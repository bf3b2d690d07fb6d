package io.registrycache.testsupport;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * A test class or method that needs the executables {@link #value()} on the {@code PATH} (a real
 * client: skopeo, containerd's ctr). Where one is missing, the tests are skipped before the class's
 * set-up runs and are reported as skipped, each with the reason; an assumption that aborts
 * {@code @BeforeAll} would leave them out of the count ("Tests run: 0"). Under CI ({@link
 * Command#inCi}) they run, and the class's own {@link Command#requireTool} fails them.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@ExtendWith(NeedsTool.Condition.class)
public @interface NeedsTool {

  /** The executables' names, as {@link Command#onPath} takes them. */
  String[] value();

  /** Disables what is annotated when one of the executables is not on the {@code PATH}. */
  final class Condition implements ExecutionCondition {

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
      Optional<NeedsTool> needs =
          context
              .getElement()
              .flatMap(element -> AnnotationSupport.findAnnotation(element, NeedsTool.class));
      return needs
          .map(n -> evaluate(n.value(), Command.inCi()))
          .orElseGet(() -> ConditionEvaluationResult.enabled("no tool needed"));
    }

    static ConditionEvaluationResult evaluate(String[] tools, boolean inCi) {
      if (inCi) {
        return ConditionEvaluationResult.enabled("CI is set: a missing tool fails the test");
      }
      List<String> missing = Arrays.stream(tools).filter(t -> !Command.onPath(t)).toList();
      return missing.isEmpty()
          ? ConditionEvaluationResult.enabled("on the PATH: " + String.join(", ", tools))
          : ConditionEvaluationResult.disabled(
              "not on the PATH: " + String.join(", ", missing) + " (skipped outside CI)");
    }
  }
}
