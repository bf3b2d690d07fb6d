package io.registrycache.testsupport;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * A test class or method that needs the Go-built tool {@link #value()} ({@link GoTools}). Where the
 * tool is not installed (nor being built), the tests are skipped before the class's set-up runs,
 * and are reported as skipped: an assumption that aborts {@code @BeforeAll} leaves them out of the
 * count ("Tests run: 0"). Under CI they run, and {@link GoTools#require} fails them.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@ExtendWith(NeedsGoTool.Condition.class)
public @interface NeedsGoTool {

  /** The tool's executable name, as {@link GoTools#require} takes it. */
  String value();

  /** Disables what is annotated when {@link GoTools#missing} names the tool. */
  final class Condition implements ExecutionCondition {

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
      return context
          .getElement()
          .flatMap(element -> AnnotationSupport.findAnnotation(element, NeedsGoTool.class))
          .flatMap(needs -> GoTools.missing(needs.value()))
          .map(ConditionEvaluationResult::disabled)
          .orElseGet(
              () ->
                  ConditionEvaluationResult.enabled(
                      "the tool is installed, being built, or CI is set"));
    }
  }
}
